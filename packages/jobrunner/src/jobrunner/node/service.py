"""The job service: every rule and every state change of jobrunner, behind the HTTP front end.

Nothing here waits for a job on behalf of a request: submit validates and enqueues, workers run
jobs one per slot, and every read answers from memory. Blocking work (unpacking, hashing, copying,
deleting) runs in threads so the event loop stays free.
"""

import asyncio
import contextlib
import logging
import mimetypes
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from jobrunner import __version__, errors, manifest, signing, uploads
from jobrunner.config import Settings
from jobrunner.environments import TEMPLATES, Environments, EnvironmentUnavailable, interpreters
from jobrunner.jobs import Job, Log, new_job_id, timestamp
from jobrunner.logformat import client_key
from jobrunner.metrics import WorkerMetrics
from jobrunner.node.listing import LISTING_BYTES, ListingBudget, listing
from jobrunner.ratelimit import Limits, RateLimiter, Reservation, StreamSlot, Verdict
from jobrunner.sandbox import RunResult, RunSpec
from jobrunner.scheduling import Queued, Scheduler
from jobrunner.wire import (
    Environments as EnvironmentListing,
)
from jobrunner.wire import (
    Health,
    OutputListing,
    Quota,
    ServerInfo,
    Stats,
    StatusRecord,
    SubmitResult,
    SystemStats,
)

log = logging.getLogger("jobrunner")
# Threads besides one per job slot: uploads, hashing, deletion and environment builds.
SPARE_THREADS = 8
T = TypeVar("T")
_UNNAMED_ROOM = 256  # kept in the log for the line counting the outputs it could not name
# How much of a name a log line shows: its start and its end, so that the reason after it fits
# in a note (`jobs.NOTE_MAX`). Escaped whole, a name can be 16 KiB (4 per byte of a 4 KiB path),
# and escaping runs on the event loop: 1,100 such names took 3.5 s. Only what is shown is escaped.
_NAME_HEAD, _NAME_TAIL = 500, 200
# The manifest's stdin, kept beside the inputs (not in memory) from the submit until the job runs.
STDIN_FILE = "stdin"
# How long `DELETE /jobs/{id}` waits for a running job's jail to be killed and taken down (it takes
# well under a second; more means a bug, and the answer is then the record as it stands). Below the
# pool's 30 s for a short upstream request.
CANCEL_PATIENCE = 20.0
CANCELLED_NOTE = "the job was cancelled (DELETE /jobs/{id})"
SHUTDOWN_NOTE = "the job was cancelled: the server shut down and its grace of {grace:g} s was over"


def _shown(name: str) -> str:
    if len(name) <= _NAME_HEAD + _NAME_TAIL:
        return _cut(printable(name))
    return _cut(f"{printable(name[:_NAME_HEAD])}...{printable(name[-_NAME_TAIL:])}")


def _cut(shown: str) -> str:
    """At most a head and a tail of an escaped name (escapes take up to 10 characters)."""
    if len(shown) <= _NAME_HEAD + _NAME_TAIL + 3:
        return shown
    return f"{shown[:_NAME_HEAD]}...{shown[-_NAME_TAIL:]}"


class Runner(Protocol):
    """What runs one job: the nsjail sandbox, the unsafe runner, or a test's fake."""

    async def run(
        self,
        spec: RunSpec,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None] = ...,
        stop: asyncio.Event | None = ...,
    ) -> RunResult:
        """Run the job; once `stop` is set, kill it (or never start it) and return at once with
        what was measured, without its outputs (`failure: cancelled`)."""
        ...


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def printable(path: str) -> str:
    """A job's file name as one safe line: undecodable bytes as \\xNN, controls escaped too."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


async def _till_done(work: Awaitable[T], stop: Callable[[], None]) -> T:
    """Await `work` (a thread's); if the caller is cancelled meanwhile, `stop` it and wait until
    it has ended before the cancellation goes on. The caller then removes what the thread wrote
    and gives its client's slot back, neither of which may happen while the thread still runs:
    the slot is what bounds each client's unpacking threads."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        stop()
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what goes on
        raise


@dataclass(frozen=True)
class Download:
    path: Path
    name: str
    media_type: str


class JobService:
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
        self.running = 0
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
        self._tasks: list[asyncio.Task[None]] = []
        self.metrics = metrics or WorkerMetrics()
        self.metrics.watch(
            queue_length=lambda: len(self.queue),
            running=lambda: self.running,
            slots=lambda: settings.concurrency,
            accepting=lambda: int(self.accepting),
        )
        self._executor: ThreadPoolExecutor | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        # Every running job keeps a thread busy (waiting for its sandbox); the default pool is
        # sized from the CPU count, so with more slots than that /submit would wait for a job to
        # end. One thread per slot plus spares keeps blocking work from ever queueing behind jobs.
        self._executor = ThreadPoolExecutor(
            self.settings.concurrency + SPARE_THREADS, thread_name_prefix="jobrunner"
        )
        asyncio.get_running_loop().set_default_executor(self._executor)
        await asyncio.to_thread(self._prepare_state)
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"worker-{n}")
            for n in range(self.settings.concurrency)
        ]
        self._tasks.append(asyncio.create_task(self._reaper(), name="reaper"))

    def _prepare_state(self) -> None:
        state = self.settings.state
        state.mkdir(parents=True, exist_ok=True)
        state.chmod(0o711)  # the jail must traverse it to reach binds; nobody may list it
        # Jobs of an earlier run are gone with its memory: their files must go too.
        # (The sandbox has killed and unmounted what they left before we got here.)
        shutil.rmtree(self.jobs_dir, ignore_errors=True)
        self.jobs_dir.mkdir(mode=0o711, exist_ok=True)
        self.environments.prepare()

    async def shutdown(self) -> None:
        """What SIGTERM does (`server.py`): drain, then hand the finished jobs over."""
        await self.drain()
        await self.hand_over()

    async def drain(self) -> None:
        """Stop accepting (submit answers 503, `GET /health` says `draining`) and give the jobs
        already accepted, queued ones included, the grace period to finish while their status
        and log stay readable. Those unfinished when it is over are stopped: `failed`, `failure:
        cancelled`, signed, their log saying why, so that every job accepted has a final record
        to collect (a pool in front of this server reports it instead of `worker_lost`)."""
        if self.accepting:
            unfinished = self._unfinished()
            log.info(
                "draining: new jobs are refused (503), %d queued and %d running job(s) get up "
                "to %g s",
                sum(1 for job in unfinished if job.state == "queued"),
                self.running,
                self.settings.shutdown_grace,
                extra={"event": "server.draining"},
            )
        self.accepting = False
        deadline = self.clock() + self.settings.shutdown_grace
        async with self._queue_changed:
            while self._unfinished() and (left := deadline - self.clock()) > 0:
                # Woken when a job ends; a second at most (a cancel or a failed build ends a
                # queued job without a notification).
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._queue_changed.wait(), min(left, 1.0))
        if unfinished := self._unfinished():
            log.info(
                "drained: the grace is over, %d unfinished job(s) are stopped (cancelled)",
                len(unfinished),
            )
            note = SHUTDOWN_NOTE.format(grace=self.settings.shutdown_grace)
            await asyncio.gather(*(self._stop(job, note) for job in unfinished))
        else:
            log.info("drained: no job is running")

    async def hand_over(self) -> None:
        """After the drain: keep serving finished jobs until each was collected (its final
        record read, by `GET /status`, a long poll or a cancel's answer, and every output
        downloaded) or deleted (`retention`, `delete_after_download`), and no log or download
        is still being sent. A job finished before this began is deleted within `retention`, so
        that bounds the wait. Then the server may exit: a pool has the records, the clients
        their files."""
        deadline = self.clock() + self.settings.retention
        if not self._handing_over():
            return
        log.info(
            "handing over: %d finished job(s) not yet collected (status read in a final state, "
            "every output downloaded); serving them until they are, or deleted (at most %g s; "
            "a second SIGTERM stops at once)",
            len(self._uncollected()),
            self.settings.retention,
            extra={"event": "server.handing_over"},
        )
        while self._handing_over() and self.clock() < deadline:
            await asyncio.sleep(0.2)  # reads, downloads and deletions come from other tasks
        log.info(
            "handed over: %d finished job(s) left uncollected",
            len(self._uncollected()),
            extra={"event": "server.handed_over"},
        )

    def _unfinished(self) -> list[Job]:
        return [job for job in self.jobs.values() if not job.finished]

    def _uncollected(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.finished and not job.collected]

    def _handing_over(self) -> bool:
        return bool(self._uncollected()) or self.limiter.streams_open() > 0

    async def stop(self) -> None:
        """Drain (unless a drain has begun: one cancelled by a second signal means at once),
        then cancel what is left."""
        if self.accepting:
            await self.drain()
        for task in [*self._tasks, *self._waiting]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._waiting, return_exceptions=True)
        log.info("stopped", extra={"event": "server.stopped"})

    # --- submit ----------------------------------------------------------------------------------

    def admit(self, client: str) -> Reservation:
        """A slot for one submission of `client` (its rate key: the edge derives it from the
        address), taken before its body is read: a client over its limits is refused at once
        instead of after uploading. `cancel` it if the upload fails."""
        if not self.accepting:
            raise errors.shutting_down()
        self._check_queue_room()
        reservation = self.limiter.reserve(client)
        if not isinstance(reservation, Reservation):
            raise errors.rate_limited(reservation)
        return reservation

    def _check_queue_room(self) -> None:
        if len(self.queue) >= self.settings.max_queue:
            raise errors.queue_full(self.settings.max_queue)

    def cancel(self, reservation: Reservation) -> None:
        self.limiter.cancel(reservation)

    async def submit(
        self,
        client: str,
        manifest_text: str,
        parts: list[uploads.UploadPart],
        reservation: Reservation | None = None,
        deadline: float | None = None,
    ) -> SubmitResult:
        """Validate, unpack and enqueue a job (admitting it first unless `reservation` is given).

        The upload must be unpacked by `deadline` (`time.monotonic()`; by default `upload_timeout`
        from now): the front end passes the one it gave the reading of the body, so reading and
        unpacking together take at most `upload_timeout`."""
        if reservation is None:
            reservation = self.admit(client)
        elif not self.accepting:
            self.limiter.cancel(reservation)
            raise errors.shutting_down()
        job_dir = self.jobs_dir / new_job_id()
        try:
            if deadline is None:
                deadline = time.monotonic() + self.settings.upload_timeout
            job = await self._accept(client, manifest_text, parts, job_dir, deadline)
            self._check_queue_room()  # uploads admitted together may have filled it meanwhile
        except BaseException:
            self.limiter.cancel(reservation)
            await asyncio.to_thread(shutil.rmtree, job_dir, True)
            raise
        self.jobs[job.id] = job
        job.queued_at = self.clock()
        async with self._queue_changed:
            self.queue.add(job.id, client, job.manifest.timeout)
            self._queue_changed.notify_all()  # a worker may start it now, or none may yet
        self.metrics.accepted.inc()
        log.info("job %s accepted", job.id, extra=self._facts(job, event="job.accepted"))
        result = SubmitResult(job.id, "queued", self._position(job) or 0, job.job_hash)
        # A free slot's worker takes the job now, before this answer is written: its jail is
        # set up (in a thread) while the answer goes out, not after.
        await asyncio.sleep(0)
        return result

    async def _accept(
        self,
        client: str,
        manifest_text: str,
        parts: list[uploads.UploadPart],
        job_dir: Path,
        deadline: float,
    ) -> Job:
        s = self.settings
        try:
            parsed = manifest.parse(
                manifest_text,
                interpreters=set(self.interpreters),
                environments=set(TEMPLATES),
                max_timeout=s.max_timeout,
                max_memory_mb=s.max_memory_mb,
            )
        except manifest.ManifestError as error:
            raise errors.invalid_manifest(str(error)) from None
        if not parts:
            raise errors.invalid_files("no files were uploaded (form field `files`)")
        budget = uploads.Budget(s.storage_mb * 1_000_000, s.max_entries, deadline)
        stdin = parsed.stdin.encode()
        spent = [0.0]  # the unpacking thread's CPU: the client's, whether the upload is refused

        def unpack() -> None:
            started = time.thread_time()
            try:
                self._unpack(parts, job_dir, budget, stdin)
            finally:
                spent[0] = time.thread_time() - started

        try:
            await _till_done(asyncio.to_thread(unpack), budget.stop)
        except uploads.UploadError as error:
            raise errors.invalid_files(str(error)) from None
        except uploads.Expired:
            raise errors.UploadTimeout(
                f"the upload was not received and unpacked within {s.upload_timeout:g} s"
            ) from None
        finally:
            self.limiter.charge(client, spent[0])
        inputs = {item.path: item.sha256 for item in budget.files}
        if parsed.entrypoint not in inputs:
            raise errors.invalid_manifest(
                f"entrypoint not found in the upload: {parsed.entrypoint}"
            )
        return Job(
            id=job_dir.name,
            client=client,
            # Hashed with its stdin; held without it (up to 1 MiB, in the job dir till it runs).
            manifest=msgspec.structs.replace(parsed, stdin=""),
            inputs=budget.files,
            job_hash=signing.job_hash(parsed, inputs.items()),
            directory=job_dir,
            log=Log(s.log_cap_mb * 2**20),
            stdin=bool(stdin),
        )

    @staticmethod
    def _unpack(
        parts: list[uploads.UploadPart], job_dir: Path, budget: uploads.Budget, stdin: bytes
    ) -> None:
        job_dir.mkdir(mode=0o711)
        inputs = job_dir / "inputs"
        inputs.mkdir(mode=0o755)
        if stdin:  # only the server reads it: the runner hands the job a copy (see jail.py)
            with open(job_dir / STDIN_FILE, "xb", opener=_private) as handle:
                handle.write(stdin)
        uploads.unpack(parts, inputs, budget)

    # --- running ---------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            entry = await self._next()
            job = self.jobs.get(entry.job_id)
            if job is None or job.finished:  # cancelled meanwhile
                continue
            try:
                if not self.environments.built(job.manifest.environment):
                    self._wait_for_environment(job, entry)  # the slot goes to the next job
                    continue
                self.running += 1
                self.queue.started(entry)
                try:
                    await self._run(job)
                finally:
                    self.running -= 1
                    self.queue.finished(entry)
                    async with self._queue_changed:
                        # For the other workers (a slot is free) and drain() (a job ended).
                        self._queue_changed.notify_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                # Whatever one job did, this slot keeps serving the others.
                log.exception("job %s: the runner loop failed", job.id)
                self._fail_after_crash(job)

    async def _next(self) -> Queued:
        """The next job to start in this worker's slot, by the scheduler's choice. None may start
        (only long jobs queued, and the long jobs' slots taken): look again when something
        changes, or after a second (clients turn short or long, and jobs wait long enough, as
        time passes)."""
        async with self._queue_changed:
            while (entry := self.queue.take(self.settings.concurrency - self.running)) is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._queue_changed.wait(), 1.0 if self.queue else None)
            return entry

    def _wait_for_environment(self, job: Job, entry: Queued) -> None:
        name = job.manifest.environment
        job.log.note(f"environment {name!r} is being built; the job runs when it is ready")

        async def when_built() -> None:
            try:
                await self.environments.ensure(name)
            except Exception as error:  # the build failed: the jobs that needed it fail
                if not job.finished:  # (unless cancelled meanwhile)
                    job.failure = "environment_error"
                    self._finish(job, self.clock(), str(error))
                return
            if job.finished:
                return
            async with self._queue_changed:
                self.queue.requeue(entry)
                self._queue_changed.notify_all()

        task = asyncio.create_task(when_built())
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    async def _run(self, job: Job) -> None:
        s = self.settings
        job.state, job.started_at = "running", timestamp()
        started = self.clock()
        self.metrics.job_started(started - job.queued_at)
        log.info("job %s started", job.id, extra=self._facts(job, event="job.started"))
        note = None
        setup_seconds = None
        try:
            environment = await self.environments.acquire(job.manifest.environment)
            m = job.manifest
            spec = RunSpec(
                job_id=job.id,
                job_dir=job.directory,
                environment=environment,
                argv=[self.interpreters[m.interpreter or ""], m.entrypoint, *m.args],
                env=m.env,
                timeout=m.timeout,
                memory_bytes=m.memory_mb * 2**20,
                cpu_seconds=m.timeout,
                storage_bytes=s.storage_mb * 1_000_000,
                storage_inodes=s.max_entries + 1000,
                output_patterns=m.outputs,
                inputs={item.path: item.sha256 for item in job.inputs},
                max_outputs=s.max_outputs,
                stdin=job.directory / STDIN_FILE if job.stdin else None,
            )
            result = await self.runner.run(
                spec,
                job.log.append,
                on_cpu=lambda cpu: self.limiter.cpu_used(job.client, job.id, cpu),
                stop=job.cancelled,
            )
            job.exit_code, job.failure = result.exit_code, result.failure
            setup_seconds = result.setup_seconds
            job.cpu_seconds, job.memory_peak_bytes = result.cpu_seconds, result.memory_peak_bytes
            note = result.note
            if job.cancelled.is_set():
                # Whatever the jail was doing when the cancel came (even finishing): a cancelled
                # job has no results, only what it used.
                job.failure, note = "cancelled", job.cancel_note or CANCELLED_NOTE
            else:
                note = self._keep_outputs(job, result) or note
        except EnvironmentUnavailable as error:
            job.failure, note = "environment_error", str(error)
        except Exception as error:
            log.exception("job %s: the sandbox failed", job.id)
            # The exception's text may name host paths: the job's log gets only its kind.
            job.failure, note = "sandbox_error", f"the sandbox failed ({type(error).__name__})"
        self._finish(job, started, note)
        self.metrics.job_ran(job.wall_seconds, setup_seconds)

    def _keep_outputs(self, job: Job, result: RunResult) -> str | None:
        """The outputs the wire can carry; the others are named in the log with why, as long as
        the log has room for them and for one line counting those it could not name. Outputs
        whose names do not fit the listing's budget (`listing.LISTING_BYTES`) fail the job
        `output_limit`, unless it failed already; the reason line is returned then."""
        job.outputs = {}
        unnamed = over_budget = 0
        budget = ListingBudget()
        for out in result.outputs:
            problem = out.problem
            if problem is None:
                try:
                    out.path.encode("utf-8")
                except UnicodeEncodeError:
                    problem = "its name is not valid UTF-8 (kept on disk, not listed)"
            if problem is None and not budget.admit(out.path):
                over_budget += 1
                problem = (
                    f"the names listed before it fill the {LISTING_BYTES // 2**20} MiB that a "
                    "job's listing may take (kept on disk, not listed)"
                )
            if problem is None:
                job.outputs[out.path] = out
            elif unnamed or not job.log.note(
                f"output {_shown(out.path)} not listed: {problem}",
                keep=_UNNAMED_ROOM,
            ):
                unnamed += 1
        unnamed += result.unlisted
        if unnamed:
            job.log.note(
                f"{unnamed} more output(s) not listed (not copied out, a directory not read, a "
                "name not UTF-8, or the listing full); the log names only the first ones"
            )
        if over_budget and job.failure is None:
            job.failure = "output_limit"
            return (
                f"{over_budget} output file(s) not listed: their names add up to more than the "
                f"{LISTING_BYTES // 2**20} MiB that a job's listing may take"
            )
        return None

    def _fail_after_crash(self, job: Job) -> None:
        """A job whose handling raised: report it `sandbox_error` (signed if at all possible)."""
        if job.finished:
            return
        job.failure = "sandbox_error"
        job.outputs = {}
        try:
            self._finish(job, self.clock(), "the sandbox failed (internal error)")
        except Exception:
            log.exception("job %s: could not even record its failure", job.id)
            job.state, job.finished_at = "failed", timestamp()
            job.delete_at = self.clock() + self.settings.retention
            job.log.close()
            self._release(job)
            job.done.set()

    def _release(self, job: Job) -> None:
        if not job.released:
            job.released = True
            self.limiter.cpu_used(job.client, job.id, job.cpu_seconds)
            self.limiter.finished(job.client, job.id)

    def _finish(self, job: Job, started: float, note: str | None) -> None:
        self._release(job)
        job.wall_seconds = self.clock() - started
        job.finished_at = timestamp()
        job.state = "completed" if job.failure is None and job.exit_code == 0 else "failed"
        if job.state == "failed" and job.failure is None:
            job.failure = "nonzero_exit"
        if job.failure == "nonzero_exit" and not note:
            note = f"the job exited with code {job.exit_code}"  # every failure ends its log so
        job.signature = self.key.sign(signing.result_message(self._record(job)))
        job.delete_at = self.clock() + self.settings.retention
        if note:
            job.log.last(note)
        job.log.close()
        self.metrics.job_finished(job.state, job.failure)
        job.done.set()
        log.info(
            "job %s %s%s in %.3f s (%.3f CPU-s)",
            job.id,
            job.state,
            f" ({job.failure})" if job.failure else "",
            job.wall_seconds,
            job.cpu_seconds,
            extra=self._facts(job, event="job.finished"),
        )

    def _facts(self, job: Job, event: str) -> dict[str, object]:
        """The `extra=` fields of a log line about `job` (see `jobrunner.logformat`)."""
        return {
            "event": event,
            "job_id": job.id,
            "client": client_key(job.client),
            "status": job.state,
            "failure": job.failure,
        }

    # --- cancelling ------------------------------------------------------------------------------

    async def cancel_job(self, job_id: str) -> StatusRecord:
        """Stop a job that has not finished: `failed` with `failure: cancelled`, signed, its
        client's slot given back. A queued job (in the queue or waiting for its environment)
        never runs; a running one's jail is killed, and the answer waits until it is gone (at
        most CANCEL_PATIENCE), with its CPU and memory as measured. A finished job is a conflict.
        Anyone who holds the job id may cancel it, as they may read it."""
        job = self.find(job_id)
        if job.finished:
            raise errors.job_finished(job.id, job.state, job.failure)
        await self._stop(job, CANCELLED_NOTE)
        return self._read(job)

    async def _stop(self, job: Job, note: str) -> None:
        """Cancel an unfinished job, `note` its log's last line: a queued one never runs, a
        running one's jail is killed and waited for (at most CANCEL_PATIENCE)."""
        job.cancel_note = note
        job.cancelled.set()
        if job.state == "queued":
            with contextlib.suppress(ValueError):  # absent: waiting for its environment
                self.queue.remove(job.id)
            job.failure = "cancelled"
            self._finish(job, self.clock(), note)
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CANCEL_PATIENCE):
                    await job.done.wait()

    async def wait(self, job_id: str, seconds: float) -> StatusRecord:
        """The job's record once it has finished, or after `seconds` as it is then. A waiter
        costs an event wait, nothing more: `_finish` wakes it."""
        job = self.find(job_id)
        if not job.finished:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await job.done.wait()
        return self._read(job)

    # --- reading ---------------------------------------------------------------------------------

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

    def open_stream(self, client: str) -> StreamSlot:
        """A slot for one stream of this client (a log, plain or WebSocket, or a download), or
        429 when it has `rate_streams` open already. Close it when the stream ends. (The edge
        refuses streams with 503 while the process is short of open files.)"""
        slot = self.limiter.open_stream(client)
        if not isinstance(slot, StreamSlot):
            raise errors.rate_limited(slot)
        return slot

    def status(self, job_id: str) -> StatusRecord:
        return self._read(self.find(job_id))

    def outputs(self, job_id: str) -> OutputListing:
        job = self.find(job_id)
        return OutputListing(job.id, listing((path, out.size) for path, out in job.outputs.items()))

    def download(self, job_id: str, path: str) -> Download:
        job = self.find(job_id)
        if path not in job.outputs:  # only listed outputs; traversal can never match one
            raise errors.file_not_found(path)
        job.downloaded.add(path)
        if job.downloaded >= job.outputs.keys() and job.delete_at is not None:
            job.delete_at = min(job.delete_at, self.clock() + self.settings.delete_after_download)
        media_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
        return Download(job.directory / "outputs" / path, path.rpartition("/")[2], media_type)

    def quota(self, verdict: Verdict) -> Quota:
        """What `/stats` tells a client of its limits (the embedded and the cluster verdicts
        alike): the server shutting down overrides whatever the limits would allow."""
        limit = self.settings.rate_cpu_seconds
        return Quota(
            used=verdict.cpu_used,
            limit=limit,
            available=round(max(0.0, limit - verdict.cpu_used), 3),
            active_jobs=verdict.active,
            can_submit=verdict.allowed and self.accepting,
            reason=verdict.reason if self.accepting else "the server is shutting down",
            retry_after=verdict.retry_after,
        )

    def stats(self, client: str) -> Stats:
        verdict = self.limiter.verdict(client)
        quota = self.quota(verdict)
        return Stats(quota, SystemStats(queue_length=len(self.queue), active_jobs=self.running))

    def environment_listing(self) -> EnvironmentListing:
        return EnvironmentListing(
            list(TEMPLATES), self.environments.stats(), sorted(self.interpreters)
        )

    def info(self, warning: str | None = None) -> ServerInfo:
        s = self.settings
        return ServerInfo(
            service="jobrunner",
            status="running",
            description="Anonymous job execution: send a gzip tarball and a JSON manifest; the "
            "job runs in an nsjail sandbox and its status, log and outputs are served here.",
            privacy=f"No accounts. Jobs and their files are deleted {s.delete_after_download:g} s "
            f"after every output has been downloaded, and at the latest "
            f"{s.retention:g} s after they finish. The queue lives in memory: a server that "
            f"stops runs the jobs it accepted for up to {s.shutdown_grace:g} s and cancels "
            "those still unfinished then. Client IP addresses are kept in memory "
            "only as long as the rate-limit windows need them.",
            limits=f"per IP: {s.rate_cpu_seconds:g} CPU-seconds per {s.rate_cpu_window:g} s, "
            f"{s.rate_concurrent} concurrent jobs, {s.rate_per_hour} jobs per hour, "
            f"{s.rate_streams} streams (logs, downloads) at once; per "
            f"job: {s.max_memory_mb} MB memory, {s.max_timeout} s run time, "
            f"{s.storage_mb} MB storage; uploads up to {s.max_upload_mb} MiB",
            version=__version__,
            warning=warning,
        )

    def health(self, challenge: str | None) -> Health:
        """`healthy`, or `draining` once shutting down: it takes no new job, and a pool or a
        load balancer sends it none (the edge answers 503 then) while it finishes and hands
        over the ones it has."""
        return self.key.health("healthy" if self.accepting else "draining", challenge)

    # --- deletion --------------------------------------------------------------------------------

    async def _reaper(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            now = self.clock()
            due = [
                job
                for job in self.jobs.values()
                if job.delete_at is not None and job.delete_at <= now
            ]
            for job in due:
                del self.jobs[job.id]
                await asyncio.to_thread(shutil.rmtree, job.directory, True)
            self.limiter.sweep()
            self.queue.sweep()
