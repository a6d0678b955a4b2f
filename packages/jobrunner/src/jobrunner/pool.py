"""The trusted pool coordinator: one jobrunner interface in front of allowlisted workers.

Workers are listed in a TOML file (URL, Ed25519 public key, capacity). A worker is healthy only
while it signs a fresh challenge with that key, so a server that merely copies a public key is
never used. Each job goes to the least-loaded healthy worker (a refused dispatch is retried on the
next one); every finished result's signature is checked against the allowlisted key before the
pool reports it; jobs on a worker that stops answering are reported failed with `worker_lost`.
Rate limits apply here, per client IP; workers see the client in `X-Forwarded-For` (the pool
must be one of their trusted proxies).
"""

import asyncio
import contextlib
import logging
import secrets
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import msgspec

from jobrunner import errors
from jobrunner.jobs import timestamp
from jobrunner.ratelimit import Limits, RateLimiter, Reservation
from jobrunner.signing import WorkerKey, challenge_message, verify_record, verify_signature
from jobrunner.wire import Quota, Stats, StatusRecord, SystemStats, decode_status
from servekit import HTTPError

log = logging.getLogger("jobrunner.pool")
FINISHED = ("completed", "failed")


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

    @property
    def url(self) -> str:
        return self.entry.url.rstrip("/")

    @property
    def load(self) -> float:
        return self.active / max(1, self.entry.capacity)


@dataclass
class PoolJob:
    job_id: str
    worker: Worker
    client_ip: str
    finished: bool = False
    lost: StatusRecord | None = None  # the pool's own record once the worker is lost


@dataclass
class Pool:
    workers: list[Worker]
    key: WorkerKey
    limits: Limits = field(default_factory=Limits)
    health_interval: float = 2.0
    clock: object = time.monotonic
    jobs: dict[str, PoolJob] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.limiter = RateLimiter(self.limits, self.clock)  # type: ignore[arg-type]
        self.session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task] = []

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5)
        )
        await self.check_all()
        self._tasks = [asyncio.create_task(self._watch())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.check_all()
                await self._follow_jobs()
            except Exception:
                log.exception("pool watch failed")

    # --- worker health ---------------------------------------------------------------------------

    async def check_all(self) -> None:
        await asyncio.gather(*(self._check(worker) for worker in self.workers))

    async def _check(self, worker: Worker) -> None:
        nonce = secrets.token_urlsafe(24)
        problem = None
        try:
            async with self.session.get(  # type: ignore[union-attr]
                f"{worker.url}/health",
                params={"challenge": nonce},
                timeout=aiohttp.ClientTimeout(total=max(1.0, self.health_interval)),
            ) as reply:
                body = await reply.json(content_type=None)
            if body.get("worker_id") != worker.entry.key:
                problem = "answers with a key that is not the allowlisted one"
            elif not verify_signature(
                worker.entry.key,
                challenge_message(nonce),
                str(body.get("challenge_signature") or ""),
            ):
                problem = "failed the signed challenge (it does not hold the key)"
            else:
                stats = await self._get_json(worker, "/stats")
                worker.queue_length = int(stats.get("system", {}).get("queue_length", 0))
        except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError) as error:
            problem = f"unreachable ({type(error).__name__})"
        was_healthy, was_problem = worker.healthy, worker.problem
        worker.healthy, worker.problem = problem is None, problem or ""
        if was_healthy != worker.healthy or was_problem != worker.problem:
            log.info(
                "worker %s is %s",
                worker.url,
                "healthy" if worker.healthy else f"unhealthy: {problem}",
            )
        if was_healthy and not worker.healthy:
            self._lose_jobs(worker)

    def _lose_jobs(self, worker: Worker) -> None:
        for job in self.jobs.values():
            if job.worker is worker and not job.finished:
                job.finished = True
                job.lost = _lost_record(job.job_id, worker.entry.key)
                worker.active = max(0, worker.active - 1)
                self.limiter.finished(job.client_ip, job.job_id)
                log.info("job %s failed: worker_lost (%s)", job.job_id, worker.url)

    async def _get_json(self, worker: Worker, path: str) -> dict:
        async with self.session.get(f"{worker.url}{path}") as reply:  # type: ignore[union-attr]
            return await reply.json(content_type=None)

    async def _follow_jobs(self) -> None:
        """Learn which jobs ended (for the per-IP limits and the workers' loads)."""
        for job in [j for j in self.jobs.values() if not j.finished]:
            with contextlib.suppress(HTTPError, errors.JobrunnerError):  # the health check decides
                await self.status(job.job_id)

    # --- submitting ------------------------------------------------------------------------------

    async def submit(self, client_ip: str, body: bytes, content_type: str) -> tuple[int, bytes]:
        reservation = self.limiter.reserve(client_ip)
        if not isinstance(reservation, Reservation):
            raise errors.rate_limited(reservation)
        refusals = []
        for worker in sorted((w for w in self.workers if w.healthy), key=lambda w: w.load):
            try:
                async with self.session.post(  # type: ignore[union-attr]
                    f"{worker.url}/submit",
                    data=body,
                    headers={"Content-Type": content_type, "X-Forwarded-For": client_ip},
                ) as reply:
                    answer = await reply.read()
            except (aiohttp.ClientError, TimeoutError) as error:
                refusals.append(f"{worker.url}: {type(error).__name__}")
                continue
            if reply.status == 200:
                job_id = msgspec.json.decode(answer)["job_id"]
                self.jobs[job_id] = PoolJob(job_id, worker, client_ip)
                worker.active += 1
                return 200, answer
            if reply.status in (400, 413):  # the request itself is wrong: no other worker helps
                self.limiter.cancel(reservation)
                return reply.status, answer
            refusals.append(f"{worker.url}: {reply.status}")
        self.limiter.cancel(reservation)
        raise HTTPError(
            503,
            "No worker available",
            "; ".join(refusals) or "no healthy worker in the pool",
            headers={"Retry-After": str(max(1, int(self.health_interval)))},
        )

    # --- reading ---------------------------------------------------------------------------------

    def find(self, job_id: str) -> PoolJob:
        job = self.jobs.get(job_id)
        if job is None:
            raise errors.job_not_found(job_id)
        return job

    async def status(self, job_id: str) -> StatusRecord:
        job = self.find(job_id)
        if job.lost is not None:
            return job.lost
        try:
            async with self.session.get(  # type: ignore[union-attr]
                f"{job.worker.url}/status/{job_id}"
            ) as reply:
                raw = await reply.read()
        except (aiohttp.ClientError, TimeoutError):
            await self._check(job.worker)  # gone for good? then the job is lost, now
            if job.lost is not None:
                return job.lost
            raise HTTPError(502, "Worker unreachable", job.worker.url) from None
        if reply.status == 404:
            raise errors.job_not_found(job_id)
        record = decode_status(raw)
        if record.status in FINISHED:
            if not verify_record(record, job.worker.entry.key):
                record = msgspec.structs.replace(record, status="failed", failure="bad_signature")
                log.warning("job %s: result signature does not verify (%s)", job_id, job.worker.url)
            self._finished(job, record)
        return record

    def _finished(self, job: PoolJob, record: StatusRecord) -> None:
        if job.finished:
            return
        job.finished = True
        job.worker.active = max(0, job.worker.active - 1)
        self.limiter.cpu_used(job.client_ip, job.job_id, record.execution_metadata.cpu_seconds)
        self.limiter.finished(job.client_ip, job.job_id)

    def route(self, job_id: str) -> Worker:
        """The worker to proxy a read to (404 for unknown or lost jobs)."""
        job = self.find(job_id)
        if job.lost is not None:
            raise HTTPError(404, "Job not found", f"{job_id} (its worker was lost)")
        return job.worker

    def any_worker(self) -> Worker:
        for worker in self.workers:
            if worker.healthy:
                return worker
        raise HTTPError(503, "No worker available", "no healthy worker in the pool")

    def stats(self, client_ip: str) -> Stats:
        verdict = self.limiter.verdict(client_ip)
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


def _lost_record(job_id: str, worker_id: str) -> StatusRecord:
    from jobrunner.wire import ExecutionMetadata, WorkerMetadata

    return StatusRecord(
        job_id=job_id,
        status="failed",
        execution_metadata=ExecutionMetadata(),
        job_hash="",
        output_files={},
        worker_metadata=WorkerMetadata(worker_id, None),
        position=None,
        created_at=timestamp(),
        started_at=None,
        finished_at=timestamp(),
        wall_seconds=0.0,
        failure="worker_lost",
    )
