"""How a node takes the cluster's jobs: it pulls, claiming one only while it has a free slot,
unpacks the upload as it was queued, runs the job in the embedded runner loop and publishes its
final record (the slot it leaves claims the next job in the same call).

Separate from the submit path (which only queues) and from liveness (which settles the jobs of
other nodes): this is the one part that runs jobs on this node.
"""

import asyncio
import io
import logging
import time

import msgspec

from jobrunner import errors, uploads, vouching
from jobrunner.cluster.queue import Claimed, NotAllowed
from jobrunner.cluster.state import BEAT, ClusterState
from jobrunner.jobs import Job
from jobrunner.wire import StatusRecord, decode_status

log = logging.getLogger("jobrunner.cluster")
_encode = msgspec.json.encode
# An idle node waits for the queue's wake-up (`ClusterQueue.wait_for_work`) and claims at once;
# it claims anyway every IDLE seconds (the safety net: a wake-up taken by a node that died).
IDLE = 1.0
NOT_ALLOWED = 1.0  # seconds between two claims of a node whose key is not on the allowlist


class Upload(msgspec.Struct, array_like=True):
    """A queued job's upload as it was received and checked: the client's address, the manifest
    text and each file part's name and bytes (gzip tarballs, as sent)."""

    client: str  # the client's rate key (an IPv4 address, an IPv6 /64)
    manifest: str
    parts: list[tuple[str | None, bytes]]


class Claiming(ClusterState):
    async def _linger(self) -> None:
        """No wait before a job's teardown here: a node publishes the job's record to the
        cluster once its run is done, teardown included."""

    async def _claimer(self) -> None:
        """Claim a job whenever a slot is free (pull): never more than `concurrency` at once.
        Idle, wait for the queue's wake-up; a slot freed by a job's end was offered the next
        job already (`_publish`)."""
        while True:
            if not self._free_slot():
                await self._slot_freed_or(1.0)
                continue
            try:
                if not await self._claim_one():
                    await self.cq.wait_for_work(IDLE)
            except NotAllowed:
                await asyncio.sleep(NOT_ALLOWED)
            except errors.ClusterUnavailable:
                await asyncio.sleep(BEAT)

    def _free_slot(self) -> bool:
        return self.accepting and self.taken < self.settings.concurrency

    async def _claim_one(self) -> bool:
        """Claim the cluster's next job into a free slot (held while asking, so that claims
        made at once never exceed the slots); False if nothing is queued."""
        self.taken += 1
        try:
            claimed = await self.cq.claim(self.node_id, self.advertise)
        except BaseException:
            self._give_slot_back()
            raise
        if claimed is None:
            self._give_slot_back()
            return False
        self._took(claimed)
        return True

    def _give_slot_back(self) -> None:
        self.taken -= 1
        self._slot_freed.set()

    def _took(self, claimed: Claimed) -> None:
        """Run a job claimed into a slot already counted in `taken`: as this node's submit
        checked it, its files in place, if that submit has not answered yet (its upload is not
        unpacked again); else from its upload in the store."""
        unpacked = self._checked.pop(claimed.job_id, None)
        if unpacked is not None:
            self._adopt(unpacked)
        self._spawn(self._take(claimed, unpacked), f"job-{claimed.job_id}")

    def _adopt(self, job: Job) -> None:
        job.queued_at = self.clock()
        self.jobs[job.id] = job
        self._changed(job.id)  # a status request waiting here now follows it locally

    async def _take(self, claimed: Claimed, unpacked: Job | None) -> None:
        job = unpacked
        copied = [0]  # how much of the job's log its pump has copied into the store
        try:
            if job is None:
                job = await self._unpack_claimed(claimed, decode_status(claimed.record))
            if job is None:
                return
            if not self.environments.built(job.manifest.environment):
                job.log.note(f"environment {job.manifest.environment!r} is being built")
                try:
                    await self.environments.ensure(job.manifest.environment)
                except Exception as error:
                    job.failure = "environment_error"
                    self._finish(job, self.clock(), str(error))
            started, taken_back = asyncio.Event(), asyncio.Event()
            pump = self._spawn(self.logs.pump(job.id, job.log, started, copied), f"log-{job.id}")
            if not job.finished:
                starter = self._spawn(self._start_soon(job, started, taken_back), f"start-{job.id}")
                try:
                    await self._run(job)
                finally:
                    starter.cancel()
            await pump
            if taken_back.is_set():  # the cluster gave the job to another node: not ours
                del self.jobs[job.id]
                await asyncio.to_thread(self._remove_files, job.id)
                return
            await self._publish(job, self.logs.tail(job.log, copied[0], job.state))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("job %s: the node's handling failed", claimed.job_id)
            if job is not None:
                self._fail_after_crash(job)
                await self._publish(job, self.logs.tail(job.log, copied[0], job.state))
            else:  # before it was a job here: it must not stay claimed by a live node forever
                await self._fail_unstarted(claimed)
        finally:
            self.taken -= 1
            self._slot_freed.set()

    async def _start_soon(
        self, job: Job, started: asyncio.Event, taken_back: asyncio.Event
    ) -> None:
        """Write the job's start into the store once it has run for `start_after` seconds (its
        status reads `running` on every node from then on, and its log is copied as it grows).
        Most jobs end sooner: their only write is their end (one call to the store for a whole
        run, with its log). Until then other nodes read the job `queued` at position 0 (about
        to start), and a node lost meanwhile has it queued again, to run from its start
        elsewhere (none of its log was copied). If the cluster has taken the job back meanwhile
        (this node was thought lost), its run here is stopped."""
        await asyncio.sleep(self.settings.start_after)
        if job.finished:
            return
        running = msgspec.structs.replace(self._record(job), status="running", position=None)
        if await self._persist(lambda: self.cq.start(job.id, self.node_id, _encode(running))):
            started.set()
        elif not job.finished:
            taken_back.set()
            job.cancel_note = "taken back by the cluster"
            job.cancelled.set()

    async def _publish(self, job: Job, log_tail: list[bytes]) -> None:
        """The job's final record (and its CPU, for its client's limits) into the store, with
        the end of its log; in the same call, the slot it leaves claims the next job, if this
        node takes any."""
        record = _encode(self._record(job))
        taking = self.accepting and self.taken <= self.settings.concurrency
        url = self.advertise if taking else ""
        done, claimed = await self._persist(
            lambda: self.cq.finish_and_claim(
                job.id, self.node_id, record, job.cpu_seconds, url, log_tail
            )
        )
        if not done:
            log.warning("job %s: its record was not taken (the cluster had settled it)", job.id)
        if claimed is not None:
            self.taken += 1  # the slot this job leaves (its `finally` gives it back)
            self._took(claimed)

    async def _fail_unstarted(self, claimed: Claimed) -> None:
        """Settle a claimed job that never became a job here: `failed`, `sandbox_error`,
        signed by this node, its log ended."""
        queued = decode_status(claimed.record)
        record = vouching.own_record(
            self.key, claimed.job_id, queued.job_hash, queued.created_at, "sandbox_error"
        )
        await self._persist(lambda: self.cq.finish(claimed.job_id, self.node_id, _encode(record)))
        await self._persist(lambda: self.logs.end(claimed.job_id, "failed"))

    async def _unpack_claimed(self, claimed: Claimed, queued: StatusRecord) -> Job | None:
        if (scrapping := self._scrapping.get(claimed.job_id)) is not None:
            # This node's submit checked the job, answered and is removing those files: the
            # upload is unpacked into the same place once they are gone.
            await asyncio.shield(scrapping)
        upload = msgspec.msgpack.decode(claimed.upload, type=Upload)
        parts = [uploads.UploadPart(name, io.BytesIO(data)) for name, data in upload.parts]
        job_dir = self.jobs_dir / claimed.job_id
        deadline = time.monotonic() + self.settings.upload_timeout
        try:
            job = await self._accept(upload.client, upload.manifest, parts, job_dir, deadline)
        except errors.JobrunnerError as error:  # checked at submit: another node's settings
            await asyncio.to_thread(self._remove_files, job_dir.name)
            log.warning("job %s: refused by this node after all: %s", claimed.job_id, error)
            await self._fail_unstarted(claimed)
            return None
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self._remove_files, job_dir.name))
            raise
        job.created_at = queued.created_at
        self._adopt(job)
        return job
