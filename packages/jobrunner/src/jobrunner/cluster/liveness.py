"""A node's liveness in the cluster: its heartbeat into the registry, and the settling of the jobs
of nodes whose heartbeat has expired (queued again if they had not started, else `worker_lost`).

Apart from claiming because it acts on other nodes' jobs, and apart from the reads because it
writes final records on its own schedule, not on a request.
"""

import asyncio
import contextlib
import logging
import time

import msgspec

from jobrunner import errors, vouching
from jobrunner.cluster.registry import NodeFacts
from jobrunner.cluster.state import BEAT, ClusterState
from jobrunner.cluster.store import text
from jobrunner.wire import decode_status

log = logging.getLogger("jobrunner.cluster")
_encode = msgspec.json.encode


class Liveness(ClusterState):
    def facts(self) -> NodeFacts:
        s = self.settings
        free = max(0, s.concurrency - self.taken) if self.accepting else 0
        return NodeFacts(self.node_id, self.advertise, s.concurrency, free, not self.accepting)

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(errors.ClusterUnavailable):
                await self.registry.beat(self.facts())
            await asyncio.sleep(BEAT)

    async def _reap_lost(self) -> None:
        """Settle the jobs of nodes whose heartbeat has expired (see `registry`)."""
        while True:
            await asyncio.sleep(BEAT)
            store = self.store
            if (
                not store.healthy
                or time.monotonic() - store.healthy_since < self.settings.lost_after
            ):
                continue
            with contextlib.suppress(errors.ClusterUnavailable):
                await self._settle_lost()
                forget_after = max(self.settings.retention, self.settings.lost_after)
                for node in await self.registry.forget_silent(forget_after):
                    log.info("node %s: lost for %g s, forgotten", node, forget_after)

    async def _settle_lost(self) -> None:
        running = await self.cq.running()
        alive: dict[str, bool] = {self.node_id: True}
        for job_id, node in running.items():
            if node not in alive:
                alive[node] = await self.registry.alive(node)
            if alive[node]:
                continue
            if await self.cq.requeue(job_id, node):
                log.info("job %s: its node was lost before it started; queued again", job_id)
                continue
            fields = await self.cq.job(job_id)
            if not fields:
                continue
            queued = decode_status(fields["record"])
            record = vouching.own_record(
                self.key, job_id, text(fields.get("hash", b"")), queued.created_at, "worker_lost"
            )
            if await self.cq.finish(job_id, node, _encode(record)):
                await self.logs.end(job_id, "failed")
                log.info("job %s failed: worker_lost (node %s)", job_id, node)
