"""The trusted pool coordinator: one jobrunner interface in front of allowlisted workers.

Workers are listed in a TOML file (URL, Ed25519 public key, capacity). A worker is healthy only
while it signs a fresh challenge with that key, so a server that merely copies a public key is
never used. Each job goes to the least-loaded healthy worker (a refused dispatch is retried on the
next one); every finished result is checked before the pool reports it: signed by the allowlisted
key, for this job id and the job hash the worker announced at submit, with the types the
interface gives. Jobs on a worker that fails several health checks in a row are reported failed
with `worker_lost`. Each finished job's record is kept (for `retention` seconds), so `/status`
still answers once its worker is gone.

Three aiohttp sessions, each with its own connection limit and timeouts, so that one kind of
traffic can never starve another: `health` (the challenges, one connection per worker), `api`
(submit, status, outputs, cancels: short requests) and `streams` (live logs over WebSocket, plain
logs and downloads, which last as long as the client reads, and long polls of `/status?wait=`).
Rate limits apply here, per client IP (IPv6 by network); workers see the client in
`X-Forwarded-For` (the pool must be a trusted proxy).
"""

import asyncio
import contextlib
import logging
import re
import secrets
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec
from yarl import URL

from jobrunner import errors, vouching
from jobrunner.jobs import timestamp
from jobrunner.logformat import client_key
from jobrunner.metrics import PoolMetrics
from jobrunner.pool.spool import Spool
from jobrunner.ratelimit import Limits, RateLimiter, Reservation, StreamSlot
from jobrunner.signing import FINISHED, WorkerKey, challenge_message, verify_signature
from jobrunner.wire import (
    Failure,
    Quota,
    Stats,
    StatusRecord,
    SubmitResult,
    SystemStats,
    decode_status,
)
from servekit import descriptors, rate_key

log = logging.getLogger("jobrunner.pool")
# What a job id may look like before the pool ever puts one into an upstream URL.
JOB_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")  # fullmatch: `$` would let a final newline in
_API_ERRORS = (aiohttp.ClientError, TimeoutError, msgspec.DecodeError)


class WorkerEntry(msgspec.Struct, forbid_unknown_fields=True):
    url: str
    key: str  # base64 Ed25519 public key: the worker_id it must answer with
    capacity: int = 1


class WorkersFile(msgspec.Struct, forbid_unknown_fields=True):
    worker: list[WorkerEntry]


def load_workers(path: Path) -> list[WorkerEntry]:
    try:
        return msgspec.convert(tomllib.loads(path.read_text()), WorkersFile).worker
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as error:
        raise ValueError(f"{path}: {error}") from None


@dataclass
class Worker:
    entry: WorkerEntry
    healthy: bool = False
    active: int = 0
    problem: str = "not checked yet"
    queue_length: int = 0
    failed_checks: int = 0  # in a row; `lost_after` of them and its jobs are lost
    # Shutting down (its signed `GET /health` says `draining`): it gets no new job, and the pool
    # keeps collecting the records of the jobs it has, which it serves until they are collected.
    draining: bool = False

    @property
    def url(self) -> str:
        return self.entry.url.rstrip("/")

    @property
    def available(self) -> bool:
        """Whether new jobs may go to it."""
        return self.healthy and not self.draining

    @property
    def load(self) -> float:
        return self.active / max(1, self.entry.capacity)


@dataclass
class PoolJob:
    job_id: str
    worker: Worker
    client_ip: str
    job_hash: str | None  # as the worker announced it at submit (None: an older worker)
    created_at: str = field(default_factory=timestamp)
    final: StatusRecord | None = None  # the checked record, once finished
    finished_at: float | None = None  # pool clock, for retention

    @property
    def lost(self) -> bool:
        return self.final is not None and self.final.failure == "worker_lost"


class WorkerAnswer(Exception):
    """A worker could not be asked, or answered something the pool cannot use."""


@dataclass
class Pool:
    workers: list[Worker]
    key: WorkerKey
    limits: Limits = field(default_factory=Limits)
    health_interval: float = 2.0
    lost_after: int = 3  # failed health checks in a row before a worker's jobs are lost
    max_streams: int = 1000  # proxied logs (live and plain) and downloads at once
    max_uploads: int = 32  # uploads in progress at once (each: 1 MiB in memory, the rest on disk)
    api_connections: int = 100  # short upstream requests at once
    api_timeout: float = 30.0  # seconds for a short upstream request
    upload_timeout: float = 120.0  # seconds to pass an upload (up to 50 MiB) to a worker
    retention: float = 600.0  # seconds a finished job's record is kept
    clock: Callable[[], float] = time.monotonic
    jobs: dict[str, PoolJob] = field(default_factory=dict)
    metrics: PoolMetrics = field(default_factory=PoolMetrics)

    def __post_init__(self) -> None:
        self.limiter = RateLimiter(self.limits, self.clock)
        self.open_streams = 0
        self.uploads = 0  # admitted submits whose upload is being read or offered to workers
        self.metrics.uploads.set_function(lambda: self.uploads)
        for worker in self.workers:
            self._watch(worker)
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _watch(self, worker: Worker) -> None:
        self.metrics.watch_worker(
            worker.url,
            healthy=lambda: int(worker.healthy),
            active=lambda: worker.active,
            queue_length=lambda: worker.queue_length,
        )

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        def session(limit: int, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
            return aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=limit), timeout=timeout
            )

        check = max(2.0, self.health_interval)
        self._sessions = {
            "health": session(
                2 * len(self.workers) + 2, aiohttp.ClientTimeout(total=check, sock_connect=check)
            ),
            "api": session(
                self.api_connections,
                aiohttp.ClientTimeout(total=self.api_timeout, sock_connect=5),
            ),
            # No total: a download or a live log lasts as long as the client reads. A worker that
            # stops sending is caught by sock_read (downloads) and heartbeats (WebSockets).
            "streams": session(
                self.max_streams, aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=60)
            ),
        }
        await self.check_all()
        self._tasks = [
            asyncio.create_task(self._every(self.check_all), name="pool-health"),
            asyncio.create_task(self._every(self._follow_jobs), name="pool-jobs"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for session in self._sessions.values():
            await session.close()
        log.info("stopped", extra={"event": "server.stopped"})

    def client(self, ip: str) -> str:
        """The rate key the limits count `ip` under (IPv6 by its network), as a worker's edge
        derives it; the pool keeps the address itself to forward it to the workers."""
        return rate_key(ip, self.limits.ipv6_prefix)

    def session(self, kind: str) -> aiohttp.ClientSession:
        """`health`, `api` or `streams` (see the module's docstring)."""
        return self._sessions[kind]

    async def _every(self, action: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await action()
            except Exception:
                log.exception("pool %s failed", getattr(action, "__name__", "task"))

    # --- worker health ---------------------------------------------------------------------------

    async def check_all(self) -> None:
        await asyncio.gather(*(self._check(worker) for worker in self.workers))

    async def _check(self, worker: Worker) -> None:
        nonce = secrets.token_urlsafe(24)
        problem = None
        draining = False
        session = self.session("health")
        try:
            async with session.get(f"{worker.url}/health", params={"challenge": nonce}) as reply:
                body = await reply.json(content_type=None)
            if not isinstance(body, dict) or body.get("worker_id") != worker.entry.key:
                problem = "answers with a key that is not the allowlisted one"
            elif not verify_signature(
                worker.entry.key,
                challenge_message(nonce),
                str(body.get("challenge_signature") or ""),
            ):
                problem = "failed the signed challenge (it does not hold the key)"
            else:
                draining = body.get("status") == "draining"
                async with session.get(f"{worker.url}/stats") as reply:
                    stats = await reply.json(content_type=None)
                worker.queue_length = int(stats.get("system", {}).get("queue_length", 0))
        except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError) as error:
            problem = f"unreachable ({type(error).__name__})"
        was_healthy, was_problem, was_draining = worker.healthy, worker.problem, worker.draining
        worker.healthy, worker.problem = problem is None, problem or ""
        worker.draining = problem is None and draining
        worker.failed_checks = 0 if problem is None else worker.failed_checks + 1
        if was_healthy != worker.healthy or was_problem != worker.problem:
            log.info(
                "worker %s is %s",
                worker.url,
                "healthy" if worker.healthy else f"unhealthy: {problem}",
            )
        if worker.draining and not was_draining:
            log.info(
                "worker %s is draining: no new jobs go to it; the results of its jobs are "
                "collected as they finish",
                worker.url,
            )
        if worker.failed_checks >= self.lost_after:
            self._lose_jobs(worker)

    def _lose_jobs(self, worker: Worker) -> None:
        for job in self.jobs.values():
            if job.worker is worker and job.final is None:
                self._finish(job, self._own_record(job, "worker_lost"))
                log.info("job %s failed: worker_lost (%s)", job.job_id, worker.url)

    # --- submitting ------------------------------------------------------------------------------

    async def admit(self, client_ip: str) -> Reservation:
        """Take a job slot of the client and an upload slot of the pool for one submit, from its
        headers alone: a client over its limits gets 429 and a full pool 503 before anything of
        the upload is read, and an upload in progress counts against the client's concurrent
        jobs. Pass the reservation to `submit`, or to `cancel` if the upload fails."""
        if self.uploads >= self.max_uploads:
            raise errors.Busy(
                f"{self.uploads} uploads in progress; try again shortly", short_of="uploads"
            )
        if descriptors.running_low():
            raise errors.short_of_files()
        reservation = self.limiter.reserve(self.client(client_ip))
        if not isinstance(reservation, Reservation):
            # Jobs of this client may have ended since the last look: learn that, then decide.
            await self._follow_jobs(client_ip)
            reservation = self.limiter.reserve(self.client(client_ip))
            if not isinstance(reservation, Reservation):
                raise errors.rate_limited(reservation)
        self.uploads += 1
        return reservation

    def cancel(self, reservation: Reservation) -> None:
        self.uploads -= 1
        self.limiter.cancel(reservation)

    async def submit(
        self, client_ip: str, body: Spool, content_type: str, reservation: Reservation
    ) -> tuple[int, bytes]:
        """Offer the upload to the healthy workers, least loaded first. The reservation is kept
        for the job if a worker accepted it, and given back otherwise."""
        kept = False
        try:
            status, answer, taken = await self._dispatch(client_ip, body, content_type)
            if taken is not None:
                worker, accepted = taken
                self.jobs[accepted.job_id] = PoolJob(
                    accepted.job_id, worker, client_ip, accepted.job_hash
                )
                worker.active += 1
                kept = True
            return status, answer
        finally:
            self.uploads -= 1
            if not kept:
                self.limiter.cancel(reservation)

    async def _dispatch(
        self, client_ip: str, body: Spool, content_type: str
    ) -> tuple[int, bytes, tuple[Worker, SubmitResult] | None]:
        """The answer of the first worker that accepts the upload (with it), or of the
        first that says the request itself is wrong (400, 413: no other worker would help)."""
        refusals = []
        timeout = aiohttp.ClientTimeout(total=self.upload_timeout, sock_connect=5, sock_read=60)
        headers = {
            "Content-Type": content_type,
            "Content-Length": str(body.size),
            "X-Forwarded-For": client_ip,
        }
        for worker in sorted((w for w in self.workers if w.available), key=lambda w: w.load):
            try:
                async with self.session("api").post(
                    f"{worker.url}/submit", data=body.chunks(), headers=headers, timeout=timeout
                ) as reply:
                    answer = await reply.read()
            except (aiohttp.ClientError, TimeoutError) as error:
                refusals.append(f"{worker.url}: {type(error).__name__}")
                self.metrics.dispatched(worker.url, "unreachable")
                continue
            if reply.status == 200:
                try:
                    accepted = msgspec.json.decode(answer, type=SubmitResult)
                except msgspec.DecodeError:
                    accepted = None
                if accepted is None or not JOB_ID.fullmatch(accepted.job_id):
                    refusals.append(f"{worker.url}: an answer that is not a submit result")
                    self.metrics.dispatched(worker.url, "unusable")
                    continue
                self.metrics.dispatched(worker.url, "accepted")
                log.info(
                    "job %s dispatched to %s",
                    accepted.job_id,
                    worker.url,
                    extra={
                        "event": "job.accepted",
                        "job_id": accepted.job_id,
                        "client": client_key(self.client(client_ip)),
                        "status": "queued",
                    },
                )
                return 200, answer, (worker, accepted)
            if reply.status in (400, 413):  # the request itself is wrong: no other worker helps
                self.metrics.dispatched(worker.url, "invalid")
                return reply.status, answer, None
            self.metrics.dispatched(worker.url, "refused")
            refusals.append(f"{worker.url}: {reply.status}")
        raise errors.NoWorkerAvailable(
            "; ".join(refusals) or "no healthy worker in the pool",
            retry_after=max(1, int(self.health_interval)),
        )

    def open_stream(self, client_ip: str) -> StreamSlot:
        """A slot for one proxied stream (a log or a download) of this client, or 429 (see
        `RateLimiter`); 503 while the pool is short of open files."""
        if descriptors.running_low():
            raise errors.short_of_files()
        slot = self.limiter.open_stream(self.client(client_ip))
        if not isinstance(slot, StreamSlot):
            raise errors.rate_limited(slot)
        return slot

    def open_proxied(self, client_ip: str) -> Callable[[], None]:
        """Both slots of a plain proxied stream (a log or a download): the client's (429) and one
        of the pool's `max_streams` (503 when all are taken: never queued behind the streams
        session's connections). Returns what gives both back (once)."""
        if self.open_streams >= self.max_streams:
            raise errors.Busy(
                f"{self.open_streams} streams proxied at once; try again shortly",
                short_of="streams",
            )
        slot = self.open_stream(client_ip)
        self.open_streams += 1
        released = False

        def close() -> None:
            nonlocal released
            if not released:
                released = True
                self.open_streams -= 1
                slot.close()

        return close

    # --- reading ---------------------------------------------------------------------------------

    def find(self, job_id: str) -> PoolJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise errors.job_not_found(job_id)
        return job

    async def status(
        self, job_id: str, wait: float | None = None, client_ip: str | None = None
    ) -> StatusRecord:
        """The job's record as the pool can vouch for it; with `wait`, once it has finished or
        after `wait` seconds (the worker's long poll, asked for `client_ip`, whose stream the
        caller counts)."""
        job = self.find(job_id)
        if job.final is not None:
            return job.final
        try:
            return self._learn(job, await self._fetch_status(job, wait, client_ip))
        except WorkerAnswer as error:
            if job.final is not None:  # lost meanwhile (a long poll outlasts health checks)
                return job.final
            raise errors.WorkerUnreachable(f"{job.worker.url}: {error}") from None

    async def _fetch_status(
        self, job: PoolJob, wait: float | None = None, client_ip: str | None = None
    ) -> StatusRecord:
        url = URL(f"{job.worker.url}/status/{quote(job.job_id, safe='')}", encoded=True)
        try:
            if wait is None:
                async with self.session("api").get(url) as reply:
                    raw = await reply.read()
            else:
                # A long poll is a stream: through the streams session, never holding one of
                # the short requests' connections for a minute.
                timeout = aiohttp.ClientTimeout(total=wait + 15, sock_connect=5)
                async with self.session("streams").get(
                    url.with_query(wait=f"{wait:g}"),
                    timeout=timeout,
                    headers={"X-Forwarded-For": client_ip or ""},
                ) as reply:
                    raw = await reply.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise WorkerAnswer(type(error).__name__) from None
        if reply.status == 404:
            raise errors.job_not_found(job.job_id)
        if reply.status != 200:
            raise WorkerAnswer(f"status {reply.status}")
        try:
            return decode_status(raw)
        except msgspec.DecodeError as error:
            raise WorkerAnswer(f"not a status record ({error})") from None

    def _checked(self, job: PoolJob, record: StatusRecord) -> StatusRecord:
        """The worker's record if it is about this job (and, once finished, verifies); a
        finished one that does not is replaced by the pool's own `bad_signature` record."""
        if self._problem(job, record) is None:
            return record
        if record.status not in FINISHED:
            raise WorkerAnswer(f"an answer about another job ({self._problem(job, record)})")
        return self._own_record(job, "bad_signature")

    def _problem(self, job: PoolJob, record: StatusRecord) -> str | None:
        """Why the pool cannot vouch for this record of `job` (None: it can)."""
        return vouching.problem(record, {job.worker.entry.key}, job.job_id, job.job_hash)

    async def cancel_job(self, job_id: str) -> StatusRecord:
        """Ask the job's worker to cancel it; its answer (the final record, checked as every
        finished record is) finishes the job here too, so the client's slot comes back."""
        job = self.find(job_id)
        if job.lost:
            raise errors.JobNotFound(f"{job_id} (its worker was lost)")
        if job.final is None:
            url = URL(f"{job.worker.url}/jobs/{quote(job.job_id, safe='')}", encoded=True)
            try:
                async with self.session("api").delete(url) as reply:
                    raw = await reply.read()
            except (aiohttp.ClientError, TimeoutError) as error:
                raise errors.WorkerUnreachable(
                    f"{job.worker.url}: {type(error).__name__}"
                ) from None
            if reply.status == 404:
                raise errors.job_not_found(job.job_id)
            if reply.status == 200:
                try:
                    return self._learn(job, decode_status(raw))
                except (msgspec.DecodeError, WorkerAnswer) as error:
                    raise errors.WorkerUnreachable(f"{job.worker.url}: {error}") from None
            if reply.status != 409:
                raise errors.WorkerUnreachable(f"{job.worker.url}: status {reply.status}")
            await self.refresh(job)  # it finished first: learn its record
        final = job.final
        if final is None:
            raise errors.job_finished(job.job_id, "finished", None)
        raise errors.job_finished(job.job_id, str(final.status), final.failure)

    async def refresh(self, job: PoolJob) -> None:
        """Ask the job's worker how it is; a finished job's checked record is kept."""
        if job.final is not None:
            return
        try:
            self._learn(job, await self._fetch_status(job))
        except WorkerAnswer:
            return  # unreachable now: the health checks decide whether it is lost
        except errors.JobNotFound:
            self._finish(job, self._own_record(job, "worker_lost"))  # the worker forgot it

    def _learn(self, job: PoolJob, answer: StatusRecord) -> StatusRecord:
        """The record the pool vouches for, from the worker's `answer`. A finished one is kept at
        once, whichever endpoint learnt it, so that no count (`/stats`, the per-IP limits, the
        workers' loads) calls active a job that `/status` called done."""
        record = self._checked(job, answer)
        if record.status not in FINISHED or job.final is not None:
            return job.final or record
        if record is not answer:
            log.warning(
                "job %s: the result from %s does not verify: %s",
                job.job_id,
                job.worker.url,
                self._problem(job, answer),
            )
        self._finish(job, record)
        return record

    async def _follow_jobs(self, client_ip: str | None = None) -> None:
        """Learn which jobs ended (for the per-IP limits and the workers' loads), and forget
        finished ones after `retention`."""
        now = self.clock()
        for job_id, job in list(self.jobs.items()):
            if job.finished_at is not None and now - job.finished_at > self.retention:
                del self.jobs[job_id]
        key = None if client_ip is None else self.client(client_ip)
        pending = [
            job
            for job in self.jobs.values()
            if job.final is None
            and job.worker.healthy
            and (key is None or self.client(job.client_ip) == key)
        ]
        gate = asyncio.Semaphore(16)  # leave room in the api connections for clients

        async def refresh(job: PoolJob) -> None:
            async with gate:
                await self.refresh(job)

        await asyncio.gather(*(refresh(job) for job in pending))

    def _finish(self, job: PoolJob, record: StatusRecord) -> None:
        if job.final is not None:
            return
        job.final, job.finished_at = record, self.clock()
        job.worker.active = max(0, job.worker.active - 1)
        self.metrics.job_finished(record.status, record.failure)
        log.info(
            "job %s %s%s",
            job.job_id,
            record.status,
            f" ({record.failure})" if record.failure else "",
            extra={
                "event": "job.finished",
                "job_id": job.job_id,
                "client": client_key(self.client(job.client_ip)),
                "status": record.status,
                "failure": record.failure,
            },
        )
        client = self.client(job.client_ip)
        self.limiter.cpu_used(client, job.job_id, record.execution_metadata.cpu_seconds)
        self.limiter.finished(client, job.job_id)

    def _own_record(self, job: PoolJob, failure: Failure) -> StatusRecord:
        """A finished record the pool makes (and signs with its own key) when the worker's
        cannot be used: nothing of the worker's is vouched for, so it carries no results."""
        return vouching.own_record(self.key, job.job_id, job.job_hash, job.created_at, failure)

    def route(self, job_id: str) -> tuple[Worker, str]:
        """The worker to proxy a read to, and the job id as a URL path segment."""
        job = self.find(job_id)
        if job.lost:
            raise errors.JobNotFound(f"{job_id} (its worker was lost)")
        return job.worker, quote(job.job_id, safe="")

    async def environments(self) -> tuple[int, bytes]:
        for worker in self.workers:
            if not worker.healthy:
                continue
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self.session("api").get(f"{worker.url}/environments") as reply:
                    return reply.status, await reply.read()
        raise errors.NoWorkerAvailable("no healthy worker in the pool")

    def stats(self, client_ip: str) -> Stats:
        verdict = self.limiter.verdict(self.client(client_ip))
        limit = self.limits.cpu_seconds
        return Stats(
            Quota(
                used=verdict.cpu_used,
                limit=limit,
                available=round(max(0.0, limit - verdict.cpu_used), 3),
                active_jobs=verdict.active,
                can_submit=verdict.allowed,
                reason=verdict.reason,
                retry_after=verdict.retry_after,
            ),
            SystemStats(
                queue_length=sum(w.queue_length for w in self.workers if w.healthy),
                active_jobs=sum(w.active for w in self.workers),
            ),
        )
