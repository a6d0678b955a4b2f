"""A node of a cluster: the embedded `JobService` (unpacking, the sandbox, signing, the local
log and outputs) with the queue, the records, the logs and the limits in the store.

A submit is validated here as in the embedded mode (the upload is unpacked into a scratch
directory and checked, then deleted); what is queued is the upload as received, in the store,
until a node with a free slot claims the job, unpacks it again and runs it. A node pulls: it
claims only while it has a free slot. What the node ran stays with it (its outputs, its live
log); every other node answers for it from the store, and fetches outputs through it.
"""

import asyncio
import contextlib
import io
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import aiohttp
import msgspec
from redis.exceptions import RedisError
from yarl import URL

from jobrunner import errors, uploads, vouching
from jobrunner.cluster.limits import ClusterLimits, Reservation
from jobrunner.cluster.logs import LogStreams
from jobrunner.cluster.queue import Claimed, ClusterQueue, NotAllowed, QueueFull
from jobrunner.cluster.registry import NodeFacts, Registry
from jobrunner.cluster.store import Store, text
from jobrunner.config import Settings
from jobrunner.jobs import Job, new_job_id, timestamp
from jobrunner.metrics import WorkerMetrics
from jobrunner.node.service import JobService, Runner
from jobrunner.ratelimit import Limits
from jobrunner.signing import FINISHED, WorkerKey
from jobrunner.wire import (
    ServerInfo,
    Stats,
    StatusRecord,
    SubmitResult,
    SystemStats,
    decode_status,
)

log = logging.getLogger("jobrunner.cluster")
T = TypeVar("T")
# An idle node waits for the queue's wake-up (`ClusterQueue.wait_for_work`) and claims at once;
# it claims anyway every IDLE seconds (the safety net: a wake-up taken by a node that died).
IDLE = 1.0
NOT_ALLOWED = 1.0  # seconds between two claims of a node whose key is not on the allowlist
# A status request waiting for a job another node runs wakes at the job's end (the store's
# `done` channel) and looks again every RECHECK seconds anyway (the channel lost meanwhile).
RECHECK = 1.0
BEAT = 0.5  # seconds between two heartbeats
_encode = msgspec.json.encode


class Upload(msgspec.Struct, array_like=True):
    """A queued job's upload as it was received and checked: the client's address, the manifest
    text and each file part's name and bytes (gzip tarballs, as sent)."""

    client: str  # the client's rate key (an IPv4 address, an IPv6 /64)
    manifest: str
    parts: list[tuple[str | None, bytes]]


class ClusterService(JobService):
    def __init__(
        self,
        settings: Settings,
        runner: Runner,
        key: WorkerKey,
        store: Store,
        advertise: str = "",
        metrics: WorkerMetrics | None = None,
    ) -> None:
        super().__init__(settings, runner, key, metrics=metrics)
        self.store = store
        self.advertise = advertise
        self.node_id = key.worker_id
        self.cq = ClusterQueue(
            store, settings.fair_window, settings.retention, settings.rate_cpu_window
        )
        self.climits = ClusterLimits(
            store,
            Limits(
                concurrent=settings.rate_concurrent,
                per_hour=settings.rate_per_hour,
                cpu_seconds=settings.rate_cpu_seconds,
                cpu_window=settings.rate_cpu_window,
                ipv6_prefix=settings.rate_ipv6_prefix,
                streams=settings.rate_streams,
            ),
        )
        self.registry = Registry(store, settings.lost_after)
        self.logs = LogStreams(store)
        self.taken = 0  # jobs claimed by this node and not yet published as finished
        self._slot_freed = asyncio.Event()
        self._node_tasks: set[asyncio.Task[None]] = set()
        self._allowed: tuple[float, set[str]] = (0.0, set())
        self._watchers: dict[str, set[asyncio.Event]] = {}  # job id -> status requests waiting
        self.session: aiohttp.ClientSession | None = None
        self._left = False  # drained and out of the registry
        # The cluster's queue length and jobs claimed or running, read from the store at most
        # once a second, for /metrics and GET /.
        self._view: tuple[float, int, int] = (-1.0, 0, 0)
        self.metrics.watch(
            queue_length=lambda: self._view[1],
            running=lambda: self.running,
            slots=lambda: settings.concurrency,
            accepting=lambda: int(self.accepting),
        )
        self.metrics.watch_cluster(running=lambda: self._view[2])
        self.metrics.before_scrape = self.refresh_view

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await super().start()
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=60)
        )
        for name, loop in (
            ("heartbeat", self._heartbeat),
            ("claimer", self._claimer),
            ("lost-nodes", self._reap_lost),
            ("finished-jobs", self._listen),
        ):
            self._spawn(loop(), name)

    def _spawn(self, work: Awaitable[None], name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._node_tasks.add(task)
        task.add_done_callback(self._node_tasks.discard)
        return task

    async def drain(self) -> None:
        """No new jobs; the running ones finish and are published; the node stays (serving its
        outputs) until every output of its finished jobs was downloaded or has expired, then
        leaves the registry."""
        if self._left:
            return
        if self.accepting:
            log.info("draining: %d job(s) of this node still to finish", self.taken)
        self.accepting = False
        while self.taken:
            await self._slot_freed_or(1.0)
        while any(self._outputs_wanted(job) for job in self.jobs.values()):
            await asyncio.sleep(0.25)
        with contextlib.suppress(errors.ClusterUnavailable):
            await self.registry.leave(self.node_id)
        self._left = True
        log.info("drained: this node has left the cluster")

    def _outputs_wanted(self, job: Job) -> bool:
        return bool(job.outputs) and job.finished and not job.downloaded >= job.outputs.keys()

    async def hand_over(self) -> None:
        """Nothing more to hand over after `drain`: the records are in the store, readable from
        every node, and the drain already waited for this node's outputs to be downloaded."""

    async def stop(self) -> None:
        await self.drain()
        for task in list(self._node_tasks):
            task.cancel()
        await asyncio.gather(*self._node_tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
        await super().stop()

    async def _slot_freed_or(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._slot_freed.wait(), seconds)
        self._slot_freed.clear()

    # --- the node's loops ------------------------------------------------------------------------

    def facts(self) -> NodeFacts:
        s = self.settings
        free = max(0, s.concurrency - self.taken) if self.accepting else 0
        return NodeFacts(self.node_id, self.advertise, s.concurrency, free, not self.accepting)

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(errors.ClusterUnavailable):
                await self.registry.beat(self.facts())
            await asyncio.sleep(BEAT)

    async def _claimer(self) -> None:
        """Claim a job whenever a slot is free (pull): never more than `concurrency` at once.
        Idle, wait for the queue's wake-up; a slot freed by a job's end was offered the next
        job already (`_publish`)."""
        while True:
            if not self._free_slot():
                await self._slot_freed_or(1.0)
                continue
            try:
                if not await self._claim_one():
                    await self.cq.wait_for_work(IDLE)
            except NotAllowed:
                await asyncio.sleep(NOT_ALLOWED)
            except errors.ClusterUnavailable:
                await asyncio.sleep(BEAT)

    def _free_slot(self) -> bool:
        return self.accepting and self.taken < self.settings.concurrency

    async def _claim_one(self) -> bool:
        """Claim the cluster's next job into a free slot (held while asking, so that claims
        made at once never exceed the slots); False if nothing is queued."""
        self.taken += 1
        try:
            claimed = await self.cq.claim(self.node_id, self.advertise)
        except BaseException:
            self._give_slot_back()
            raise
        if claimed is None:
            self._give_slot_back()
            return False
        self._took(claimed)
        return True

    def _give_slot_back(self) -> None:
        self.taken -= 1
        self._slot_freed.set()

    async def _claim_after_submit(self) -> None:
        """A node that has just queued a job and has a free slot claims at once (the job, or
        the one due before it), without waiting for the wake-up to reach an idle node."""
        if self._free_slot():
            with contextlib.suppress(errors.ClusterUnavailable, NotAllowed):
                await self._claim_one()

    def _took(self, claimed: Claimed) -> None:
        """Run a job claimed into a slot already counted in `taken`."""
        self._spawn(self._take(claimed), f"job-{claimed.job_id}")
        self._changed(claimed.job_id)  # a status request waiting here now follows it locally

    def _changed(self, job_id: str) -> None:
        for event in self._watchers.pop(job_id, ()):
            event.set()

    @contextlib.contextmanager
    def _watching(self, job_id: str) -> Iterator[asyncio.Event]:
        """An event set when the job finishes anywhere or this node claims it."""
        event = asyncio.Event()
        self._watchers.setdefault(job_id, set()).add(event)
        try:
            yield event
        finally:
            waiting = self._watchers.get(job_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._watchers[job_id]

    async def _listen(self) -> None:
        """Every job that finishes in the cluster is published on the store's `done` channel:
        wake the status requests waiting for it here. Lost messages (the store away) only
        delay them to their next look (RECHECK)."""
        channel = self.store.key("done")
        while True:
            pubsub: Any = self.store.client.pubsub()  # redis-py leaves aclose untyped
            try:
                await pubsub.subscribe(channel)
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=RECHECK
                    )
                    if message is not None:
                        self._changed(text(message["data"]))
            except (RedisError, OSError):
                await asyncio.sleep(BEAT)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()

    async def _persist(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` once the store answers: a node's own facts are never dropped for an outage."""
        while True:
            with contextlib.suppress(errors.ClusterUnavailable):
                return await work()
            await asyncio.sleep(BEAT)

    async def _take(self, claimed: Claimed) -> None:
        job: Job | None = None
        try:
            queued = decode_status(claimed.record)
            job = await self._unpack_claimed(claimed, queued)
            if job is None:
                return
            if not self.environments.built(job.manifest.environment):
                job.log.note(f"environment {job.manifest.environment!r} is being built")
                try:
                    await self.environments.ensure(job.manifest.environment)
                except Exception as error:
                    job.failure = "environment_error"
                    self._finish(job, self.clock(), str(error))
            if not job.finished:
                running = msgspec.structs.replace(
                    self._record(job), status="running", started_at=timestamp(), position=None
                )
                started = await self._persist(
                    lambda: self.cq.start(job.id, self.node_id, _encode(running))
                )
                if not started:  # cancelled meanwhile, or taken back from this node
                    del self.jobs[job.id]
                    await asyncio.to_thread(shutil.rmtree, job.directory, True)
                    return
            state: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            pump = self._spawn(self.logs.pump(job.id, job.log, state), f"log-{job.id}")
            if not job.finished:
                self.running += 1
                try:
                    await self._run(job)
                finally:
                    self.running -= 1
            state.set_result(job.state)
            await pump
            await self._publish(job)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("job %s: the node's handling failed", claimed.job_id)
            if job is not None:
                self._fail_after_crash(job)
                await self._publish(job)
        finally:
            self.taken -= 1
            self._slot_freed.set()

    async def _publish(self, job: Job) -> None:
        """The job's final record (and its CPU, for its client's limits) into the store; in
        the same call, the slot it leaves claims the next job, if this node takes any."""
        record = _encode(self._record(job))
        taking = self.accepting and self.taken <= self.settings.concurrency
        url = self.advertise if taking else ""
        done, claimed = await self._persist(
            lambda: self.cq.finish_and_claim(job.id, self.node_id, record, job.cpu_seconds, url)
        )
        if not done:
            log.warning("job %s: its record was not taken (the cluster had settled it)", job.id)
        if claimed is not None:
            self.taken += 1  # the slot this job leaves (its `finally` gives it back)
            self._took(claimed)

    async def _unpack_claimed(self, claimed: Claimed, queued: StatusRecord) -> Job | None:
        upload = msgspec.msgpack.decode(claimed.upload, type=Upload)
        parts = [uploads.UploadPart(name, io.BytesIO(data)) for name, data in upload.parts]
        job_dir = self.jobs_dir / claimed.job_id
        deadline = time.monotonic() + self.settings.upload_timeout
        try:
            job = await self._accept(upload.client, upload.manifest, parts, job_dir, deadline)
        except errors.JobrunnerError as error:  # checked at submit: another node's settings
            await asyncio.to_thread(shutil.rmtree, job_dir, True)
            log.warning("job %s: refused by this node after all: %s", claimed.job_id, error)
            record = vouching.own_record(
                self.key, claimed.job_id, queued.job_hash, queued.created_at, "sandbox_error"
            )
            await self._persist(
                lambda: self.cq.finish(claimed.job_id, self.node_id, _encode(record))
            )
            await self._persist(lambda: self.logs.end(claimed.job_id, "failed"))
            return None
        job.created_at = queued.created_at
        job.queued_at = self.clock()
        self.jobs[job.id] = job
        return job

    async def _reap_lost(self) -> None:
        """Settle the jobs of nodes whose heartbeat has expired (see `registry`)."""
        while True:
            await asyncio.sleep(BEAT)
            store = self.store
            if (
                not store.healthy
                or time.monotonic() - store.healthy_since < self.settings.lost_after
            ):
                continue
            with contextlib.suppress(errors.ClusterUnavailable):
                await self._settle_lost()
                forget_after = max(self.settings.retention, self.settings.lost_after)
                for node in await self.registry.forget_silent(forget_after):
                    log.info("node %s: lost for %g s, forgotten", node, forget_after)

    async def _settle_lost(self) -> None:
        running = await self.cq.running()
        alive: dict[str, bool] = {self.node_id: True}
        for job_id, node in running.items():
            if node not in alive:
                alive[node] = await self.registry.alive(node)
            if alive[node]:
                continue
            if await self.cq.requeue(job_id, node):
                log.info("job %s: its node was lost before it started; queued again", job_id)
                continue
            fields = await self.cq.job(job_id)
            if not fields:
                continue
            queued = decode_status(fields["record"])
            record = vouching.own_record(
                self.key, job_id, text(fields.get("hash", b"")), queued.created_at, "worker_lost"
            )
            if await self.cq.finish(job_id, node, _encode(record)):
                await self.logs.end(job_id, "failed")
                log.info("job %s failed: worker_lost (node %s)", job_id, node)

    # --- submit ----------------------------------------------------------------------------------

    async def admit_cluster(self, client: str) -> Reservation:
        self.store.check()
        if not self.accepting:
            raise errors.shutting_down()
        if await self.cq.length() >= self.settings.max_queue:
            raise errors.queue_full(self.settings.max_queue)
        reservation = await self.climits.reserve(client)
        if not isinstance(reservation, Reservation):
            raise errors.rate_limited(reservation)
        return reservation

    async def cancel_reservation(self, reservation: Reservation) -> None:
        with contextlib.suppress(errors.ClusterUnavailable):
            await self.climits.cancel(reservation)

    async def submit_cluster(
        self,
        client: str,
        manifest_text: str,
        parts: list[uploads.UploadPart],
        reservation: Reservation,
        deadline: float,
    ) -> SubmitResult:
        """Check the upload as the embedded mode does, then queue it, as received, in the store."""
        try:
            raw = [(part.filename, await asyncio.to_thread(part.file.read)) for part in parts]
            checked = [uploads.UploadPart(name, io.BytesIO(data)) for name, data in raw]
            job_dir = self.jobs_dir / new_job_id()
            try:
                job = await self._accept(client, manifest_text, checked, job_dir, deadline)
            finally:
                await asyncio.to_thread(shutil.rmtree, job_dir, True)
            record = _encode(self._record(job))
            upload = msgspec.msgpack.encode(Upload(client, manifest_text, raw))
            s = self.settings
            position = await self.cq.enqueue(
                job.id,
                reservation.key,
                record,
                job.job_hash,
                upload,
                client,
                s.max_queue,
                s.cluster_upload_mb * 2**20,
            )
        except QueueFull:
            await self.cancel_reservation(reservation)
            raise errors.queue_full(self.settings.max_queue) from None
        except BaseException:
            await self.cancel_reservation(reservation)
            raise
        self.metrics.accepted.inc()
        self._spawn(self._claim_after_submit(), "claim-after-submit")
        log.info("job %s accepted into the cluster queue", job.id)
        return SubmitResult(job.id, "queued", position, job.job_hash)

    # --- reading ---------------------------------------------------------------------------------

    async def refresh_view(self) -> None:
        """The cluster's queue length and jobs claimed or running, if a second old (kept as
        they were while the store is away)."""
        if time.monotonic() - self._view[0] < 1.0 or not self.store.healthy:
            return
        with contextlib.suppress(errors.ClusterUnavailable):
            queued, running = await self.cq.counts()
            self._view = (time.monotonic(), queued, running)

    def info(self, warning: str | None = None) -> ServerInfo:
        """The embedded mode's answer, saying what differs in a cluster: where the queue and the
        records live, what this node does, and the cluster's queue as of `refresh_view`."""
        s = self.settings
        role = f"runs up to {s.concurrency} job(s) at once" if s.concurrency else "runs no job"
        _, queued, running = self._view
        return msgspec.structs.replace(
            super().info(warning),
            description="Anonymous job execution on a cluster of nodes: send a gzip tarball "
            "and a JSON manifest to any node; the job waits in the cluster's one queue, runs "
            "in an nsjail sandbox on the first node with a free slot, and any node serves its "
            f"status, log and outputs. This node {role}; the cluster has {queued} job(s) "
            f"queued and {running} claimed or running.",
            privacy=f"No accounts. Jobs and their files are deleted "
            f"{s.delete_after_download:g} s after every output has been downloaded, and at "
            f"the latest {s.retention:g} s after they finish. The queue, the status records, "
            "the logs and the rate-limit counters live in the cluster's store (Valkey/Redis), "
            "not in one server's memory: queued jobs survive the loss of any node, and a node "
            "that stops takes no new job and finishes its running ones first. A job's outputs "
            "stay on the node that ran it. Client IP addresses are kept in the store only as "
            "long as the rate-limit windows and the job records need them.",
        )

    async def allowed(self) -> set[str]:
        """The allowlist, read at most once a second."""
        at, keys = self._allowed
        if time.monotonic() - at > 1.0:
            keys = await self.registry.allowed()
            self._allowed = (time.monotonic(), keys)
        return keys

    async def fields(self, job_id: str) -> dict[str, bytes]:
        self.store.check()
        found = await self.cq.job(job_id)
        if not found and job_id not in self.jobs:
            raise errors.job_not_found(job_id)
        return found

    async def cluster_status(self, job_id: str) -> StatusRecord:
        fields = await self.fields(job_id)
        state = text(fields.get("state", b""))
        local = self.jobs.get(job_id)
        if state == "finished":
            return await self._vouched(job_id, fields)
        if local is not None:
            return self._record(local)
        record = decode_status(fields["record"])
        if state == "queued":
            return msgspec.structs.replace(record, position=await self.cq.position(job_id))
        if state == "claimed":
            return msgspec.structs.replace(record, position=0)
        return record

    async def _vouched(self, job_id: str, fields: dict[str, bytes]) -> StatusRecord:
        record = decode_status(fields["record"])
        job_hash = text(fields.get("hash", b"")) or None
        found = vouching.problem(record, await self.allowed(), job_id, job_hash)
        if found is None:
            return record
        log.warning("job %s: its record does not verify: %s", job_id, found)
        return vouching.own_record(self.key, job_id, job_hash, record.created_at, "bad_signature")

    async def cluster_wait(self, job_id: str, seconds: float) -> StatusRecord:
        deadline = time.monotonic() + seconds
        while True:
            with self._watching(job_id) as changed:
                record = await self.cluster_status(job_id)
                if record.status in FINISHED or time.monotonic() >= deadline:
                    return record
                local = self.jobs.get(job_id)
                if local is not None:  # this node runs it: its own signed record, once final
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                            await local.done.wait()
                    return self._record(local)
                wait = min(RECHECK, max(0.0, deadline - time.monotonic()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), wait)

    async def cluster_cancel(self, job_id: str) -> StatusRecord:
        fields = await self.fields(job_id)
        state = text(fields.get("state", b""))
        if job_id in self.jobs and state != "finished":
            record = await self.cancel_job(job_id)
            return record
        if state == "queued":
            queued = decode_status(fields["record"])
            record = vouching.own_record(
                self.key, job_id, queued.job_hash, queued.created_at, "cancelled"
            )
            if await self.cq.finish(job_id, "", _encode(record)):
                await self.logs.end(job_id, "failed")
                return record
            return await self.cluster_cancel(job_id)  # claimed meanwhile
        if state in ("claimed", "running"):
            return await self._cancel_remote(job_id, text(fields.get("url", b"")))
        record = await self.cluster_status(job_id)
        raise errors.job_finished(job_id, str(record.status), record.failure)

    async def _cancel_remote(self, job_id: str, url: str) -> StatusRecord:
        if not url or url == self.advertise or self.session is None:
            raise errors.WorkerUnreachable("the job's node cannot be reached")
        target = URL(f"{url}/jobs/{job_id}", encoded=True)
        try:
            async with self.session.delete(target) as reply:
                raw = await reply.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise errors.WorkerUnreachable(type(error).__name__) from None
        if reply.status == 409:
            record = await self.cluster_status(job_id)
            raise errors.job_finished(job_id, str(record.status), record.failure)
        if reply.status != 200:
            raise errors.WorkerUnreachable(f"status {reply.status}")
        return decode_status(raw)

    async def node_of(self, job_id: str) -> str | None:
        """The URL of the node that holds the job's outputs (None: this one, or none yet)."""
        fields = await self.fields(job_id)
        url = text(fields.get("url", b""))
        if job_id in self.jobs or not url:
            return None
        if url == self.advertise:
            raise errors.job_not_found(job_id)  # this node ran it, and has forgotten it
        return url

    async def cluster_stats(self, client: str) -> Stats:
        self.store.check()
        verdict = await self.climits.verdict(client)
        quota = self.quota(verdict)
        running = len(await self.cq.running())
        return Stats(quota, SystemStats(queue_length=await self.cq.length(), active_jobs=running))
