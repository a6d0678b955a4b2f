"""Retention: finished jobs are deleted once collected or at the latest after `retention`, and a
server that stops first hands its finished jobs over until they are collected or deleted.

Apart from the runner loop and the reads because it is the one part that forgets jobs: the reaper
deletes them (their memory and their files), and `hand_over` waits for the reads and downloads
that `collected` counts.
"""

import asyncio
import logging

from jobrunner.jobs import Job
from jobrunner.node.state import JobState

log = logging.getLogger("jobrunner")


class Retention(JobState):
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

    def _uncollected(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.finished and not job.collected]

    def _handing_over(self) -> bool:
        return bool(self._uncollected()) or self.limiter.streams_open() > 0

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
                await asyncio.to_thread(self._remove_files, job.id)
            self.limiter.sweep()
            self.queue.sweep()
