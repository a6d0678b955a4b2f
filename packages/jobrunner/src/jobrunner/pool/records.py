"""The records the pool vouches for: a job's status asked of its worker and checked (signed by the
allowlisted key, for this job and the job hash announced at submit), kept once final, and the
pool's own signed record when the worker's cannot be used (`worker_lost`, `bad_signature`).

Apart from the dispatch and the proxying because this is where a job ends for the pool: the
client's slot and the worker's load come back when a final record is learnt, whichever way.
"""

import asyncio
import logging
from urllib.parse import quote

import aiohttp
import msgspec
from yarl import URL

from jobrunner import errors, vouching
from jobrunner.logformat import client_key
from jobrunner.pool.state import PoolJob, PoolState
from jobrunner.pool.workers import Worker
from jobrunner.signing import FINISHED
from jobrunner.wire import Failure, StatusRecord, decode_status

log = logging.getLogger("jobrunner.pool")


class WorkerAnswer(Exception):
    """A worker could not be asked, or answered something the pool cannot use."""


class JobRecords(PoolState):
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

    def _lose_jobs(self, worker: Worker) -> None:
        for job in self.jobs.values():
            if job.worker is worker and job.final is None:
                self._finish(job, self._own_record(job, "worker_lost"))
                log.info("job %s failed: worker_lost (%s)", job.job_id, worker.url)
