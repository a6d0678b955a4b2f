"""The job service: every rule and every state change of jobrunner, behind the HTTP front end.

Nothing here waits for a job on behalf of a request: submit validates and enqueues, workers run
jobs one per slot, and every read answers from memory. Blocking work (unpacking, hashing, copying,
deleting) runs in threads so the event loop stays free.

Its parts are mixins over one state (`node/state.py`), each in a module of its own: the submit
path (`node/intake.py`), the runner loop and cancels (`node/running.py`), the reads
(`node/reads.py`) and retention (`node/retention.py`). This module assembles them and holds the
lifecycle: starting the workers, draining on shutdown, stopping.
"""

import asyncio
import contextlib
import logging
import shutil
from concurrent.futures import ThreadPoolExecutor

from jobrunner.jobs import Job
from jobrunner.node.intake import Intake
from jobrunner.node.reads import Reads
from jobrunner.node.retention import Retention
from jobrunner.node.running import JobRunning

log = logging.getLogger("jobrunner")
# Threads besides one per job slot: uploads, hashing, deletion and environment builds.
SPARE_THREADS = 8
SHUTDOWN_NOTE = "the job was cancelled: the server shut down and its grace of {grace:g} s was over"


class JobService(Intake, JobRunning, Reads, Retention):
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

    def _unfinished(self) -> list[Job]:
        return [job for job in self.jobs.values() if not job.finished]

    async def stop(self) -> None:
        """Drain (unless a drain has begun: one cancelled by a second signal means at once),
        then cancel what is left."""
        if self.accepting:
            await self.drain()
        for task in [*self._tasks, *self._waiting]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._waiting, return_exceptions=True)
        log.info("stopped", extra={"event": "server.stopped"})
