"""The job service's state and the record primitives every part of it reads.

`JobService` is one object in parts (submit, running, reads, retention, its lifecycle), each in a
module of its own; they share this state: the jobs in memory, the scheduler's queue, the limiter,
the environments, the runner and the worker key. What turns a job into its record (`find`,
`_record`, `_read`, `_position`) and the fields of a log line about a job (`_facts`) are here
because every part uses them.
"""

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from jobrunner import errors, signing
from jobrunner.config import Settings
from jobrunner.environments import Environments, interpreters
from jobrunner.jobs import Job
from jobrunner.logformat import client_key
from jobrunner.metrics import WorkerMetrics
from jobrunner.ratelimit import Limits, RateLimiter
from jobrunner.sandbox import RunResult, RunSpec
from jobrunner.scheduling import Scheduler
from jobrunner.wire import StatusRecord


class Runner(Protocol):
    """What runs one job: the nsjail sandbox, the unsafe runner, or a test's fake."""

    async def run(
        self,
        spec: RunSpec,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None] = ...,
        stop: asyncio.Event | None = ...,
        on_result: Callable[[RunResult], None] | None = ...,
        linger: Callable[[], Awaitable[None]] | None = ...,
    ) -> RunResult:
        """Run the job; once `stop` is set, kill it (or never start it) and return at once with
        what was measured, without its outputs (`failure: cancelled`). A runner with work left
        after the result is known (the sandbox's teardown) may give it to `on_result` first,
        and await `linger` before that work."""
        ...


class JobState:
    def __init__(
        self,
        settings: Settings,
        runner: Runner,
        key: signing.WorkerKey,
        clock: Callable[[], float] = time.monotonic,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.runner = runner
        self.key = key
        self.clock = clock
        self.jobs: dict[str, Job] = {}
        self.queue = Scheduler(
            window=settings.fair_window,
            short_job=settings.short_job,
            slots=settings.concurrency,
            reserved=settings.reserved,
            patience=settings.max_timeout,
            clock=clock,
        )
        self._queue_changed = asyncio.Condition()
        self.running = 0  # jobs started whose record is not final yet
        self.in_slots = 0  # slots taken: by those, and by finished jobs' teardowns
        self.accepting = True
        self.limiter = RateLimiter(
            Limits(
                concurrent=settings.rate_concurrent,
                per_hour=settings.rate_per_hour,
                cpu_seconds=settings.rate_cpu_seconds,
                cpu_window=settings.rate_cpu_window,
                ipv6_prefix=settings.rate_ipv6_prefix,
                streams=settings.rate_streams,
            ),
            clock,
        )
        self.environments = Environments(
            # The sandbox keeps environments where its jails can reach them (sandbox/layout.py).
            getattr(runner, "environments_root", settings.state / "envs"),
            templates_dir=Path(settings.templates_dir) if settings.templates_dir else None,
        )
        self._waiting: set[asyncio.Task[None]] = set()  # jobs waiting for their build
        self.interpreters = interpreters()
        self.jobs_dir = settings.state / "jobs"
        # Where a job's upload waits until it runs: the sandbox's tmpfs (`Sandbox.staging`) when
        # it has one and the upload fits, else the job's dir on the state dir's disk.
        self.staging: Path | None = getattr(runner, "staging", None)
        self._tasks: list[asyncio.Task[None]] = []
        self.metrics = metrics or WorkerMetrics()
        self.metrics.watch(
            queue_length=lambda: len(self.queue),
            running=lambda: self.running,
            slots=lambda: settings.concurrency,
            accepting=lambda: int(self.accepting),
        )
        self._executor: ThreadPoolExecutor | None = None

    def _remove_files(self, job_id: str) -> None:
        """Whatever of a job's files exist, in its dir and on the staging tmpfs (blocking)."""
        shutil.rmtree(self.jobs_dir / job_id, ignore_errors=True)
        if self.staging is not None:
            shutil.rmtree(self.staging / job_id, ignore_errors=True)

    def find(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise errors.job_not_found(job_id)
        return job

    def _record(self, job: Job) -> StatusRecord:
        return job.record(self.key.worker_id, self._position(job))

    def _read(self, job: Job) -> StatusRecord:
        """The record as a client (or a pool) reads it: once final, the job's result has been
        collected as far as the record goes (see `hand_over`)."""
        if job.finished:
            job.record_read = True
        return self._record(job)

    def _position(self, job: Job) -> int | None:
        """1 for the next job to start, 2 for the one after it, ... (`Scheduler.order`: as of
        now); 0 while it waits for its environment or is being picked up; None once it runs."""
        if job.state != "queued":
            return None
        ahead = self.queue.position(job.id)
        return 0 if ahead is None else ahead + 1

    def _facts(self, job: Job, event: str) -> dict[str, object]:
        """The `extra=` fields of a log line about `job` (see `jobrunner.logformat`)."""
        return {
            "event": event,
            "job_id": job.id,
            "client": client_key(job.client),
            "status": job.state,
            "failure": job.failure,
        }
