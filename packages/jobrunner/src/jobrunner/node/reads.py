"""The read side: a job's status (and its long poll), outputs and downloads, and what the server
says of itself and of a client's limits (`/`, `/stats`, `/environments`, `/health`).

Every read answers from memory and never waits for a job, except the long poll, which waits on the
job's `done` event. A download marks what the client has collected, which retention reads.
"""

import asyncio
import contextlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from jobrunner import __version__, errors
from jobrunner.environments import TEMPLATES
from jobrunner.node.listing import listing
from jobrunner.node.state import JobState
from jobrunner.ratelimit import StreamSlot, Verdict
from jobrunner.wire import Environments as EnvironmentListing
from jobrunner.wire import (
    Health,
    OutputListing,
    Quota,
    ServerInfo,
    Stats,
    StatusRecord,
    SystemStats,
)


@dataclass(frozen=True)
class Download:
    path: Path
    name: str
    media_type: str


class Reads(JobState):
    async def wait(self, job_id: str, seconds: float) -> StatusRecord:
        """The job's record once it has finished, or after `seconds` as it is then. A waiter
        costs an event wait, nothing more: `_finish` wakes it."""
        job = self.find(job_id)
        if not job.finished:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await job.done.wait()
        return self._read(job)

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
