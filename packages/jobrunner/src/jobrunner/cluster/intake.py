"""A cluster node's submit path: the client admitted against the cluster's limits and queue, the
upload checked as the embedded mode checks it, then queued as received in the store.

Separate from claiming, which unpacks and runs what was queued; a node with a free slot claims at
once after its own submit (`_claim_after_submit`), hence the mixin over `Claiming`.
"""

import asyncio
import contextlib
import io
import logging
import shutil

import msgspec

from jobrunner import errors, uploads
from jobrunner.cluster.claiming import Claiming, Upload
from jobrunner.cluster.limits import Reservation
from jobrunner.cluster.queue import QueueFull
from jobrunner.jobs import new_job_id
from jobrunner.wire import SubmitResult

log = logging.getLogger("jobrunner.cluster")
_encode = msgspec.json.encode


class ClusterIntake(Claiming):
    async def admit_cluster(self, client: str) -> Reservation:
        self.store.check()
        if not self.accepting:
            raise errors.shutting_down()
        if await self.cq.length() >= self.settings.max_queue:
            raise errors.queue_full(self.settings.max_queue)
        reservation = await self.climits.reserve(client)
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
        """Check the upload as the embedded mode does, then queue it, as received, in the store."""
        try:
            raw = [(part.filename, await asyncio.to_thread(part.file.read)) for part in parts]
            checked = [uploads.UploadPart(name, io.BytesIO(data)) for name, data in raw]
            job_dir = self.jobs_dir / new_job_id()
            try:
                job = await self._accept(client, manifest_text, checked, job_dir, deadline)
            finally:
                await asyncio.to_thread(shutil.rmtree, job_dir, True)
            record = _encode(self._record(job))
            upload = msgspec.msgpack.encode(Upload(client, manifest_text, raw))
            s = self.settings
            position = await self.cq.enqueue(
                job.id,
                reservation.key,
                record,
                job.job_hash,
                upload,
                client,
                s.max_queue,
                s.cluster_upload_mb * 2**20,
            )
        except QueueFull:
            await self.cancel_reservation(reservation)
            raise errors.queue_full(self.settings.max_queue) from None
        except BaseException:
            await self.cancel_reservation(reservation)
            raise
        self.metrics.accepted.inc()
        self._spawn(self._claim_after_submit(), "claim-after-submit")
        log.info("job %s accepted into the cluster queue", job.id)
        return SubmitResult(job.id, "queued", position, job.job_hash)
