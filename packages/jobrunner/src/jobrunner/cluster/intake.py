"""A cluster node's submit path: the client admitted against the cluster's limits and queue, the
upload checked as the embedded mode checks it, then queued as received in the store.

Separate from claiming, which unpacks and runs what was queued; a node with a free slot claims
the cluster's next job in the very call that queues the submitted one, and runs it from the
files it has just checked if that is this job (hence the mixin over `Claiming`).
"""

import asyncio
import contextlib
import io
import logging
from typing import BinaryIO

import msgspec

from jobrunner import errors, uploads
from jobrunner.cluster.claiming import Claiming, Upload
from jobrunner.cluster.limits import Reservation
from jobrunner.cluster.queue import Claimed, QueueFull
from jobrunner.jobs import Job, new_job_id
from jobrunner.wire import SubmitResult

log = logging.getLogger("jobrunner.cluster")
_encode = msgspec.json.encode
# A part up to this size is read in the event loop: starlette keeps parts of up to 1 MiB in
# memory, and a read from memory (or the page cache) costs less than a trip to a thread.
INLINE_READ = 256 * 1024


async def _read(file: BinaryIO) -> bytes:
    size = file.seek(0, io.SEEK_END)
    file.seek(0)
    if size <= INLINE_READ:
        return file.read()
    return await asyncio.to_thread(file.read)


class ClusterIntake(Claiming):
    async def admit_cluster(self, client: str) -> Reservation:
        """The queue's bound and the client's limits, checked in one call to the store."""
        self.store.check()
        if not self.accepting:
            raise errors.shutting_down()
        reservation = await self.climits.reserve(client, self.settings.max_queue)
        if not isinstance(reservation, Reservation):
            raise errors.rate_limited(reservation)
        return reservation

    async def cancel_reservation(self, reservation: Reservation) -> None:
        with contextlib.suppress(errors.ClusterUnavailable):
            await self.climits.cancel(reservation)

    async def submit_cluster(
        self,
        client: str,
        manifest_text: str,
        parts: list[uploads.UploadPart],
        reservation: Reservation,
        deadline: float,
    ) -> SubmitResult:
        """Check the upload as the embedded mode does (unpacked into the job's directory), then
        queue it, as received, in the store."""
        job_dir = self.jobs_dir / new_job_id()
        # Without a free slot now, the node will not run this job: its files are only checked
        # (removed in the unpacking's own thread, one trip to a thread as in the embedded mode).
        scratch = not self._free_slot()
        try:
            raw = [(part.filename, await _read(part.file)) for part in parts]
            checked = [uploads.UploadPart(name, io.BytesIO(data)) for name, data in raw]
            try:
                job = await self._accept(
                    client, manifest_text, checked, job_dir, deadline, keep=not scratch
                )
            except BaseException:
                if not scratch:
                    self._scrap(job_dir.name)
                raise
            if not scratch:
                self._checked[job.id] = job  # until the answer: a claim of it here runs these
            upload = msgspec.msgpack.encode(Upload(client, manifest_text, raw))
            position = await self._queue(job, reservation, upload, scratch)
        except QueueFull:
            await self.cancel_reservation(reservation)
            raise errors.queue_full(self.settings.max_queue) from None
        except BaseException:
            await self.cancel_reservation(reservation)
            raise
        finally:
            if self._checked.pop(job_dir.name, None) is not None:  # no claim here took them
                self._scrap(job_dir.name)  # removed while the answer goes out
        self.metrics.accepted.inc()
        log.info("job %s accepted into the cluster queue", job.id)
        return SubmitResult(job.id, "queued", position, job.job_hash)

    def _scrap(self, job_id: str) -> None:
        """Remove what this node's submit checked of `job_id`, in a thread; a claim of the job
        here meanwhile waits until it is gone (`_unpack_claimed`)."""
        task = self._spawn(asyncio.to_thread(self._remove_files, job_id), f"scratch-{job_id}")
        self._scrapping[job_id] = task
        task.add_done_callback(lambda _: self._scrapping.pop(job_id, None))

    async def _queue(self, job: Job, reservation: Reservation, upload: bytes, scratch: bool) -> int:
        """Queue the job; with a free slot, claim the cluster's next job in the same call (a
        pull, as the claimer's: the job due first, which may be another) and run it (this job
        from the files just checked, see `_took`). The job's position. A node that had no free
        slot when the upload came (`scratch`: the files are gone) claims nothing here: a slot
        freed meanwhile claims by itself."""
        s = self.settings
        taking = not scratch and self._free_slot()
        if taking:
            self.taken += 1  # held while asking, as `_claim_one` does
        claimed: Claimed | None = None
        try:
            position, claimed = await self.cq.enqueue_and_claim(
                job.id,
                reservation.key,
                _encode(self._record(job)),
                job.job_hash,
                upload,
                job.client,
                s.max_queue,
                s.cluster_upload_mb * 2**20,
                self.node_id,
                self.advertise if taking else "",
            )
        finally:
            if taking and claimed is None:
                self._give_slot_back()
        if claimed is not None:
            self._took(claimed)
        return position
