"""The cluster queue's Lua scripts against a model: a hypothesis state machine drives
`jobrunner.cluster.queue` directly on a real redis-server (no nodes, no sandbox): submit, claim,
start, finish, cancel, a node lost, the store restarted."""

import asyncio
from collections import deque
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jobrunner import errors
from jobrunner.cluster.queue import Claimed, ClusterQueue, NotAllowed, QueueFull
from jobrunner.cluster.store import Store, connect
from support.servers import wait_until_async

CLIENTS = ("a", "b", "c")
NODES = ("n1", "n2", "stranger")  # the stranger's key is not on the allowlist
MAX_QUEUE = 6


class QueueMachine(RuleBasedStateMachine):
    server = None  # set by the test

    @initialize()
    def connect(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server.cli("FLUSHALL")
        self.store = Store(connect(self.server.url))
        self.queue = ClusterQueue(self.store, window=600, retention=600)
        self.run(self.store.client.sadd("jr:allowed", "n1", "n2"))
        self.queued: dict[str, deque[str]] = {c: deque() for c in CLIENTS}
        self.claimed: dict[str, str] = {}
        self.running: dict[str, str] = {}
        self.finished: set[str] = set()
        self.uploads: dict[str, bytes] = {}
        self.count = 0

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.loop.run_until_complete(self.store.close())
            self.loop.close()

    def run(self, work):
        return self.loop.run_until_complete(work)

    def total_queued(self) -> int:
        return sum(len(q) for q in self.queued.values())

    @rule(client=st.sampled_from(CLIENTS), size=st.integers(0, 64))
    def submit(self, client: str, size: int) -> None:
        self.count += 1
        job = f"job{self.count:04d}xxxxxxxxxxxx"
        upload = bytes([self.count % 256]) * size
        try:
            position = self.run(
                self.queue.enqueue(job, client, b"{}", "h", upload, "ip", MAX_QUEUE, 10**6)
            )
        except QueueFull:
            assert self.total_queued() >= MAX_QUEUE  # requeued jobs may go beyond it
            return
        assert self.total_queued() < MAX_QUEUE
        self.queued[client].append(job)
        self.uploads[job] = upload
        assert 1 <= position <= self.total_queued()

    @rule(client=st.sampled_from(CLIENTS), size=st.integers(0, 64), node=st.sampled_from(NODES))
    def submit_and_claim(self, client: str, size: int, node: str) -> None:
        """What a node with a free slot does with a submit: the job queued and the cluster's
        next job claimed in the same call (a stranger's claim takes nothing)."""
        self.count += 1
        job = f"job{self.count:04d}xxxxxxxxxxxx"
        upload = bytes([self.count % 256]) * size
        try:
            position, claimed = self.run(
                self.queue.enqueue_and_claim(
                    job, client, b"{}", "h", upload, "ip", MAX_QUEUE, 10**6, node, f"http://{node}"
                )
            )
        except QueueFull:
            assert self.total_queued() >= MAX_QUEUE
            return
        assert self.total_queued() < MAX_QUEUE
        self.queued[client].append(job)
        self.uploads[job] = upload
        assert 1 <= position <= self.total_queued()
        if node == "stranger":
            assert claimed is None
            return
        # The node holds the upload of the job it submitted: the store does not send it back.
        self.claimed_as_modelled(node, claimed, b"" if claimed and claimed.job_id == job else None)

    @rule(node=st.sampled_from(NODES))
    def claim(self, node: str) -> None:
        if node == "stranger":
            with pytest.raises(NotAllowed):
                self.run(self.queue.claim(node, f"http://{node}"))
            return
        self.claimed_as_modelled(node, self.run(self.queue.claim(node, f"http://{node}")))

    def claimed_as_modelled(
        self, node: str, claimed: Claimed | None, upload: bytes | None = None
    ) -> None:
        if not self.total_queued():
            assert claimed is None
            return
        assert claimed is not None
        # First in first out within a client: it was the head of its client's queue.
        assert self.queued[claimed.client][0] == claimed.job_id
        self.queued[claimed.client].popleft()
        assert claimed.upload == (self.uploads[claimed.job_id] if upload is None else upload)
        self.claimed[claimed.job_id] = node

    @rule()
    def woken_claim(self) -> None:
        """What an idle node does: take the wake-up (if there is one), then claim."""
        woken = self.run(self.queue.wait_for_work(0.01))
        assert woken or not self.total_queued()  # a token for each waiting job
        self.claim("n1")

    @precondition(lambda self: self.claimed)
    @rule(data=st.data())
    def start(self, data) -> None:
        job = data.draw(st.sampled_from(sorted(self.claimed)))
        node = self.claimed[job]
        assert not self.run(self.queue.start(job, "n2" if node == "n1" else "n1", b"{}"))
        assert self.run(self.queue.start(job, node, b"{}"))
        self.running[job] = self.claimed.pop(job)
        assert not self.run(self.queue.start(job, node, b"{}"))  # once

    @precondition(lambda self: self.running or self.claimed)
    @rule(data=st.data())
    def finish(self, data) -> None:
        held = {**self.claimed, **self.running}
        job = data.draw(st.sampled_from(sorted(held)))
        cpu = f"jr:rlcpu:{self.run(self.queue.job(job))['client'].decode()}"
        charged = int(self.server.cli("ZCARD", cpu))
        assert self.run(self.queue.finish(job, held[job], b'{"done": 1}', cpu=0.25))
        assert int(self.server.cli("ZCARD", cpu)) == charged + 1  # its CPU, for the limit
        self.claimed.pop(job, None)
        self.running.pop(job, None)
        self.finished.add(job)
        assert not self.run(self.queue.finish(job, held[job], b"{}"))  # once

    @precondition(lambda self: any(self.queued.values()))
    @rule(data=st.data())
    def cancel_queued(self, data) -> None:
        job = data.draw(st.sampled_from(sorted(j for q in self.queued.values() for j in q)))
        assert self.run(self.queue.finish(job, "", b"{}"))
        for q in self.queued.values():
            if job in q:
                q.remove(job)
        self.finished.add(job)

    @rule(node=st.sampled_from(NODES[:2]))
    def node_lost(self, node: str) -> None:
        """What the lost-node reaper does: claimed jobs back to the front, running ones end."""
        for job in [j for j, n in self.claimed.items() if n == node]:
            assert self.run(self.queue.requeue(job, node))
            client = self.run(self.queue.job(job))["client"].decode()
            # back in arrival order: ahead of every queued job of its client (claimed later)
            self.queued[client] = deque(sorted([job, *self.queued[client]]))
            del self.claimed[job]
        for job in [j for j, n in self.running.items() if n == node]:
            assert not self.run(self.queue.requeue(job, node))  # it started: never again
            assert self.run(self.queue.finish(job, node, b'{"lost": 1}'))
            del self.running[job]
            self.finished.add(job)

    @rule()
    def store_restart(self) -> None:
        self.server.stop()
        with pytest.raises(errors.ClusterUnavailable):
            self.run(self.queue.length())
        self.server.start()

    @invariant()
    def matches_the_model(self) -> None:
        if not hasattr(self, "queue"):
            return
        assert self.run(self.queue.length()) == self.total_queued()
        assert self.run(self.queue.running()) == {**self.claimed, **self.running}
        held = [j for q in self.queued.values() for j in q] + list(self.claimed)
        expected_bytes = sum(len(self.uploads[j]) for j in held)
        assert int(self.server.cli("GET", "jr:queued_bytes") or 0) == expected_bytes
        for job in self.finished:
            assert self.run(self.queue.job(job))["state"] == b"finished"
        # One wake-up token per queued job: as many idle nodes wake as there are jobs.
        assert int(self.server.cli("LLEN", "jr:wake")) == self.total_queued()
        for client, jobs in self.queued.items():
            listed = self.server.cli("ZRANGE", f"jr:cq:{client}", "0", "-1").split()
            assert listed == list(jobs)
            # The running sum the fair share reads: the client's claimed and running jobs'
            # count and the sum of their starts, as listed one by one in run:{client} (in
            # whole milliseconds, so the sums are exact).
            starts = [float(t) for t in self.server.cli("HVALS", f"jr:run:{client}").split()]
            runs = self.server.cli("HMGET", f"jr:use:{client}", "n", "sum").split()
            if not starts:
                assert runs == [], runs
            else:
                assert int(runs[0]) == len(starts)
                assert int(runs[1]) == sum(int(t) for t in starts)
            # And the ended jobs' seconds and the first end, as listed in held:{client}: the
            # fair share reads only these two (the set is searched once its first end is out).
            ended = self.server.cli("ZRANGE", f"jr:held:{client}", "0", "-1", "WITHSCORES")
            members, ends = ended.split()[::2], [float(t) for t in ended.split()[1::2]]
            kept = self.server.cli("HMGET", f"jr:use:{client}", "held", "oldest").split()
            if not members:
                assert kept == [], kept
            else:
                assert int(kept[0]) == sum(int(m.rsplit(":", 1)[1]) for m in members)
                assert float(kept[1]) == min(ends)


def test_the_cluster_queue_matches_its_model(redis_server):
    QueueMachine.server = redis_server
    run_state_machine_as_test(
        QueueMachine,
        settings=settings(max_examples=20, stateful_step_count=25, deadline=None),
    )


def test_a_wake_up_taken_is_not_handed_out_again(redis_server):
    """A node that took a token is on its way to claim: a job queued meanwhile adds one token,
    not one for every queued job (which woke a herd of idle nodes for each job)."""
    redis_server.cli("FLUSHALL")
    redis_server.cli("SADD", "jr:allowed", "n1", "n2")

    async def scenario() -> None:
        store = Store(connect(redis_server.url))
        queue = ClusterQueue(store)
        try:
            await queue.enqueue("job1xxxxxxxxxxxxxxxx", "a", b"{}", "h", b"", "ip", 10, 10**6)
            assert await queue.wait_for_work(1.0)  # n1 woke, and has not claimed yet
            await queue.enqueue("job2xxxxxxxxxxxxxxxx", "a", b"{}", "h", b"", "ip", 10, 10**6)
            assert int(redis_server.cli("LLEN", "jr:wake")) == 1  # for job2 alone
            first = await queue.claim("n1", "http://n1")
            assert first is not None and first.job_id == "job1xxxxxxxxxxxxxxxx"
            assert int(redis_server.cli("LLEN", "jr:wake")) == 1
            second = await queue.claim("n2", "http://n2")  # a busy node's next claim
            assert second is not None and second.job_id == "job2xxxxxxxxxxxxxxxx"
            assert int(redis_server.cli("LLEN", "jr:wake")) == 0  # nobody woken for nothing
        finally:
            await store.close()

    asyncio.run(scenario())


def test_the_scripts_are_loaded_again_after_the_store_forgot_them(redis_server):
    """The queue calls its scripts by digest alone: a store that has lost them (restarted, or
    flushed by its operator) answers NOSCRIPT, and the script is loaded again and run once."""
    redis_server.cli("FLUSHALL")
    redis_server.cli("SADD", "jr:allowed", "n1")

    async def scenario() -> None:
        store = Store(connect(redis_server.url))
        queue = ClusterQueue(store)
        try:
            await queue.enqueue("job1xxxxxxxxxxxxxxxx", "a", b"{}", "h", b"u", "ip", 10, 10**6)
            redis_server.cli("SCRIPT", "FLUSH")
            claimed = await queue.claim("n1", "http://n1")
            assert claimed is not None and claimed.job_id == "job1xxxxxxxxxxxxxxxx"
            assert claimed.upload == b"u"
            redis_server.cli("SCRIPT", "FLUSH")
            assert await queue.start(claimed.job_id, "n1", b"{}")
            assert await queue.finish(claimed.job_id, "n1", b"{}")
            assert not await queue.finish(claimed.job_id, "n1", b"{}")  # once only
            assert (await queue.job(claimed.job_id))["state"] == b"finished"
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_request_that_waited_out_its_turn_is_no_outage(redis_server):
    """A request that finds the store's every turn taken for its whole timeout fails alone (503
    for that request): the store answers, so the node must not take it as down (which would
    answer 503 to every request for a while). A turn freed in time is taken."""
    redis_server.cli("FLUSHALL")

    async def scenario() -> None:
        store = Store(connect(redis_server.url), request_timeout=0.5, max_requests=1)
        try:
            client: Any = store.client
            blpop = client.blpop(["jr:nothing"], timeout=50)
            held = asyncio.ensure_future(store.call(blpop, blocks=50))
            # The only turn is taken once the store sees it blocked in the BLPOP.
            assert await wait_until_async(
                lambda: "cmd=blpop" in redis_server.cli("CLIENT", "LIST"), timeout=30
            )
            with pytest.raises(errors.ClusterUnavailable):
                await store.call(client.ping())
            assert store.healthy
            waiting = asyncio.ensure_future(store.call(client.ping(), blocks=50))
            redis_server.cli("RPUSH", "jr:nothing", "done")  # the BLPOP ends: its turn is free
            assert tuple(await held) == (b"jr:nothing", b"done")
            assert await waiting
        finally:
            await store.close()

    asyncio.run(scenario())


def test_ended_jobs_count_for_the_fair_share_until_they_leave_the_window(redis_server):
    """A client's ended jobs count for its share while they end within the window; once the
    first of them is older, every such job is taken out (the set is searched then, not on
    every read). The client's keys live while it runs something, and expire a window after."""
    redis_server.cli("FLUSHALL")
    redis_server.cli("SADD", "jr:allowed", "n1")

    async def run_one(queue: ClusterQueue, job: str, client: str) -> None:
        await queue.enqueue(job, client, b"{}", "h", b"", "ip", 10, 10**6)
        claimed = await queue.claim("n1", "http://n1")
        assert claimed is not None and claimed.job_id == job
        assert await queue.start(job, "n1", b"{}")
        assert await queue.finish(job, "n1", b"{}")

    def ended(client: str, job: str, seconds: int, ago: int) -> None:
        """As if `job` of `client` had held a slot for `seconds`, ending `ago` seconds ago (the
        store keeps these times in milliseconds)."""
        now = int(redis_server.cli("TIME").split()[0]) * 1000
        held, end = str(seconds * 1000), str(now - ago * 1000)
        redis_server.cli("DEL", f"jr:held:{client}")
        redis_server.cli("ZADD", f"jr:held:{client}", end, f"{job}:{held}")
        redis_server.cli("HSET", f"jr:use:{client}", "held", held, "oldest", end)

    async def scenario() -> None:
        store = Store(connect(redis_server.url))
        queue = ClusterQueue(store, window=600)
        try:
            await run_one(queue, "a1xxxxxxxxxxxxxxxxxx", "a")
            await run_one(queue, "b1xxxxxxxxxxxxxxxxxx", "b")
            assert 0 < int(redis_server.cli("TTL", "jr:use:a")) <= 600  # a runs nothing
            assert 0 < int(redis_server.cli("TTL", "jr:held:a")) <= 600
            ended("a", "a1xxxxxxxxxxxxxxxxxx", 100, ago=700)  # out of the window
            ended("b", "b1xxxxxxxxxxxxxxxxxx", 50, ago=10)
            await queue.enqueue("b2xxxxxxxxxxxxxxxxxx", "b", b"{}", "h", b"", "ip", 10, 10**6)
            await queue.enqueue("a2xxxxxxxxxxxxxxxxxx", "a", b"{}", "h", b"", "ip", 10, 10**6)
            claimed = await queue.claim("n1", "http://n1")  # a has held nothing in the window
            assert claimed is not None and claimed.job_id == "a2xxxxxxxxxxxxxxxxxx"
            assert redis_server.cli("EXISTS", "jr:held:a") == "0"
            assert redis_server.cli("HMGET", "jr:use:a", "held", "oldest").split() == []
            assert int(redis_server.cli("TTL", "jr:use:a")) == -1  # a runs a2: kept
            assert await queue.start(claimed.job_id, "n1", b"{}")
            assert await queue.finish(claimed.job_id, "n1", b"{}")
            assert 0 < int(redis_server.cli("TTL", "jr:use:a")) <= 600
            assert await queue.position("b2xxxxxxxxxxxxxxxxxx") == 1
        finally:
            await store.close()

    asyncio.run(scenario())
