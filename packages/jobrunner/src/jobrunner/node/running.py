"""The runner loop: one worker per slot takes the scheduler's next job and runs it in the sandbox.

It holds everything from a job's start to its signed final record: waiting for its environment,
the run itself, the outputs kept, the record signed and the client's slot given back, a crash
turned into `sandbox_error`, and a cancel (the queued job never runs; the running one's jail is
killed and waited for). Separate from the submit path and the reads, which never wait on a job.
"""

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable

from jobrunner import errors, signing
from jobrunner.environments import EnvironmentUnavailable
from jobrunner.jobs import Job, timestamp
from jobrunner.node.intake import STDIN_FILE
from jobrunner.node.outputs import keep_outputs
from jobrunner.node.state import JobState
from jobrunner.sandbox import RunResult, RunSpec
from jobrunner.scheduling import Queued
from jobrunner.wire import StatusRecord

log = logging.getLogger("jobrunner")
# How long `DELETE /jobs/{id}` waits for a running job's jail to be killed and taken down (it takes
# well under a second; more means a bug, and the answer is then the record as it stands). Below the
# pool's 30 s for a short upstream request.
CANCEL_PATIENCE = 20.0
CANCELLED_NOTE = "the job was cancelled (DELETE /jobs/{id})"
# How long a finished job's teardown (its cgroups, its work dir's unmount) waits while no job is
# queued: it then runs while the next job's jail does (a sequential client's next job is set up
# and started within 3 to 6 ms of the answer, and runs for 15 ms or more), not beside that job's
# submit and set-up, nor beside the answer of the job it tears down. Traced on a 2-core host: the
# submit to completed of a hello world 0.3 to 0.45 ms shorter. A queued job ends the wait at once.
TEARDOWN_LINGER = 0.010


class JobRunning(JobState):
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
                self.in_slots += 1
                self.queue.started(entry)
                try:
                    await self._run(job)
                finally:
                    self.in_slots -= 1
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
            while (entry := self.queue.take(self.settings.concurrency - self.in_slots)) is None:
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

    async def _linger(self) -> None:
        """Up to `TEARDOWN_LINGER` seconds, while no job is queued: the wait before a finished
        job's teardown (its slot is taken until the teardown is done)."""
        async with self._queue_changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._queue_changed.wait_for(lambda: bool(self.queue)), TEARDOWN_LINGER
                )

    async def _run(self, job: Job) -> None:
        s = self.settings
        job.state, job.started_at = "running", timestamp()
        self.running += 1  # until its record is final (`_finish`), not until its teardown is done
        started = self.clock()
        self.metrics.job_started(started - job.queued_at)
        log.info("job %s started", job.id, extra=self._facts(job, event="job.started"))

        def conclude(result: RunResult) -> None:
            """The job's record from its result: called by the sandbox as soon as the result is
            known, before its jail is taken down (or here, by a runner that does not)."""
            job.exit_code, job.failure = result.exit_code, result.failure
            job.cpu_seconds, job.memory_peak_bytes = result.cpu_seconds, result.memory_peak_bytes
            note = result.note
            if job.cancelled.is_set():
                # Whatever the jail was doing when the cancel came (even finishing): a cancelled
                # job has no results, only what it used.
                job.failure, note = "cancelled", job.cancel_note or CANCELLED_NOTE
            else:
                note = keep_outputs(job, result) or note
            self._finish(job, started, note)
            self.metrics.job_ran(job.wall_seconds, result.setup_seconds)

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
                inputs_bytes=sum(item.size for item in job.inputs),
                max_outputs=s.max_outputs,
                stdin=job.upload / STDIN_FILE if job.stdin else None,
                staged=job.staged,
            )
            result = await self.runner.run(
                spec,
                job.log.append,
                on_cpu=lambda cpu: self.limiter.cpu_used(job.client, job.id, cpu),
                stop=job.cancelled,
                on_result=conclude,
                linger=self._linger,
            )
            if not job.finished:  # the result was not handed over before the teardown
                conclude(result)
            return
        except EnvironmentUnavailable as error:
            job.failure, note = "environment_error", str(error)
        except Exception as error:
            if job.finished:  # its record is out: what failed was the teardown after it
                log.exception("job %s: the sandbox failed after the job had finished", job.id)
                return
            log.exception("job %s: the sandbox failed", job.id)
            # The exception's text may name host paths: the job's log gets only its kind.
            job.failure, note = "sandbox_error", f"the sandbox failed ({type(error).__name__})"
        self._finish(job, started, note)
        self.metrics.job_ran(job.wall_seconds, None)

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

    def _in_background(self, work: Callable[..., object], *args: object) -> None:
        """`work(*args)` in the thread pool, not waited for. (With the pool shut down the server
        is stopping, and what it would have removed goes with the staging tmpfs.)"""
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().run_in_executor(None, work, *args)

    def _finish(self, job: Job, started: float, note: str | None) -> None:
        if job.state == "running":  # no count calls active a job `/status` calls finished
            self.running -= 1
        self._release(job)
        # Its upload goes now rather than with its record at the end of the retention: all its
        # files if it never ran (cancelled while queued, its environment failed; it has no
        # outputs), its staged upload if a set-up that failed left it there.
        if job.started_at is None:
            self._in_background(self._remove_files, job.id)
        elif job.staged is not None and job.staged.exists():
            self._in_background(shutil.rmtree, job.staged, True)
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
