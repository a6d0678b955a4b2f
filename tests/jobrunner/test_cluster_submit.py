"""A cluster node's submit path (`jobrunner.cluster.intake`): what it asks the store, the queue's
bound held by the store's scripts whichever front end a submit reaches, and the node with a free
slot that runs the job it was sent, claimed in the call that queued it. Real nodes, real
redis-server, counted with the store's own MONITOR (no timing)."""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from jobrunner import errors
from jobrunner.cluster.limits import ClusterLimits, Reservation
from jobrunner.cluster.queue import ClusterQueue
from jobrunner.cluster.store import Store
from jobrunner.ratelimit import Limits
from support.jobclient import submit, wait_finished, worker_key
from support.redisserver import Monitor
from support.servers import wait_until

pytestmark = pytest.mark.timeout(300)
JOB = ({"main.py": "print(1)"}, {"entrypoint": "main.py"})


def client_commands(monitor: Monitor, address: str) -> list[str]:
    """The commands nodes sent (not those a script ran) that name the client's address as an
    argument or read the queue: what a submit asks the store; the nodes' own heartbeats and
    reaping name neither."""
    lines = Path(monitor.path).read_text(errors="replace").splitlines()
    return [
        line
        for line in lines
        if "lua]" not in line and (f'"{address}"' in line or '"jr:queue"' in line)
    ]


def seen_so_far(monitor: Monitor, redis_server, mark: str) -> None:
    """Every command the store ran before now is in the monitor's file: a mark sent now is."""
    redis_server.cli("ECHO", mark)
    assert wait_until(lambda: monitor.count("ECHO", mark) == 1, timeout=30)


def test_a_front_end_asks_the_store_twice_per_submit(start_node, redis_server, monitor):
    """Once before the upload is read (the queue's bound and the client's limits, in one
    script), once to queue it."""
    front = start_node(concurrency=0)
    # The first submit loads the scripts into the store (each is sent again after NOSCRIPT).
    assert submit(front.url, *JOB).status_code == 200
    seen_so_far(monitor, redis_server, "warmed-up")
    before = len(client_commands(monitor, "127.0.0.1"))
    submits = 4
    for _ in range(submits):
        answer = submit(front.url, *JOB)
        assert answer.status_code == 200, answer.text
    seen_so_far(monitor, redis_server, "submitted")
    asked = client_commands(monitor, "127.0.0.1")[before:]
    assert len(asked) == 2 * submits, "\n".join(asked)
    assert all('"EVALSHA"' in line for line in asked), "\n".join(asked)


def test_the_queue_bound_holds_with_submits_at_once_from_two_front_ends(start_node):
    """Ten submits at once, five to each front end, on a queue of three: three are queued,
    seven refused with 503 and Retry-After, and the refused ones took no slot of the client."""
    fronts = [start_node("--max-queue", "3", concurrency=0) for _ in range(2)]
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda n: submit(fronts[n % 2].url, *JOB), range(10)))
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200] * 3 + [503] * 7, [a.text for a in answers]
    for refused in (a for a in answers if a.status_code == 503):
        assert refused.headers["Retry-After"] == "10"
        assert "the queue is full (3 jobs)" in refused.json()["details"]
    stats = httpx.get(f"{fronts[1].url}/stats", timeout=30).json()
    assert stats["system"]["queue_length"] == 3
    assert stats["your_quota"]["active_jobs"] == 3


def test_a_node_with_a_free_slot_runs_the_job_it_was_sent(start_node):
    """It claims in the very call that queues the job, before any idle node can wake for it;
    the others stay idle. One job at a time, so that its slot is free at each submit: the next
    is sent once the idle node reads the job as finished (its final record is in the store, and
    the slot given back)."""
    sent_to = start_node(concurrency=1)
    idle = start_node(concurrency=1)  # waiting for the queue's wake-up
    for _ in range(6):
        answer = submit(sent_to.url, {"main.py": "print('here')"}, {"entrypoint": "main.py"})
        assert answer.status_code == 200, answer.text
        record = wait_finished(idle.url, answer.json()["job_id"])
        assert record["status"] == "completed", record
        assert record["worker_metadata"]["worker_id"] == worker_key(sent_to.url)


def test_a_full_queue_is_refused_before_a_slot_is_taken(redis_server):
    """The reservation reads the queue's bound in its script: a full queue is refused with
    nothing taken of the client's limits; below the bound, the slot is taken."""
    redis_server.cli("FLUSHALL")
    limits = Limits(concurrent=3, per_hour=8, cpu_seconds=10.0, cpu_window=60.0)

    async def scenario() -> None:
        store = Store(aioredis.from_url(redis_server.url), request_timeout=60)
        try:
            queue, climits = ClusterQueue(store), ClusterLimits(store, limits)
            for n in range(2):
                await queue.enqueue(f"job{n}xxxxxxxxxxxxxxxx", "a", b"{}", "h", b"", "a", 10, 10**6)
            with pytest.raises(errors.Busy, match=r"the queue is full \(2 jobs\)"):
                await climits.reserve("203.0.113.7", max_queue=2)
            assert (await climits.verdict("203.0.113.7")).active == 0
            assert isinstance(await climits.reserve("203.0.113.7", max_queue=3), Reservation)
            assert (await climits.verdict("203.0.113.7")).active == 1
        finally:
            await store.close()

    asyncio.run(scenario())
