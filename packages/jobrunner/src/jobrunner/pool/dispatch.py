"""Submits through the pool: the client admitted (its limits and the pool's upload slots, from the
headers alone), then the upload offered to the healthy workers, least loaded first, until one
accepts it; the job is then routed to that worker.

Apart from the records because it is the only part that picks a worker for a job.
"""

import logging
import re

import aiohttp
import msgspec

from jobrunner import errors
from jobrunner.logformat import client_key
from jobrunner.pool.records import JobRecords
from jobrunner.pool.spool import Spool
from jobrunner.pool.state import PoolJob
from jobrunner.pool.workers import Worker
from jobrunner.ratelimit import Reservation
from jobrunner.wire import SubmitResult
from servekit import descriptors

log = logging.getLogger("jobrunner.pool")
# What a job id may look like before the pool ever puts one into an upstream URL.
JOB_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")  # fullmatch: `$` would let a final newline in


class Dispatch(JobRecords):
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
    ) -> tuple[int, bytes, str | None]:
        """Offer the upload to the healthy workers, least loaded first: the answer to pass on
        and the id of the job a worker accepted (None if none did). The reservation is kept
        for the job if a worker accepted it, and given back otherwise."""
        kept = False
        try:
            status, answer, taken = await self._dispatch(client_ip, body, content_type)
            if taken is None:
                return status, answer, None
            worker, accepted = taken
            self.jobs[accepted.job_id] = PoolJob(
                accepted.job_id, worker, client_ip, accepted.job_hash
            )
            worker.active += 1
            kept = True
            return status, answer, accepted.job_id
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
