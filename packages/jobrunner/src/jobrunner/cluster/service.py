"""A node of a cluster: the embedded `JobService` (unpacking, the sandbox, signing, the local
log and outputs) with the queue, the records, the logs and the limits in the store.

A submit is validated here as in the embedded mode (the upload is unpacked and checked); what is
queued is the upload as received, in the store, until a node with a free slot claims the job,
unpacks it again and runs it. The node that received it claims in the same call if it has a free
slot, and runs it from the files it checked; else those are deleted. A node pulls: it
claims only while it has a free slot. What the node ran stays with it (its outputs, its live
log); every other node answers for it from the store, and fetches outputs through it.

The node is `ClusterState` (`cluster/state.py`) in parts: claiming (`cluster/claiming.py`),
liveness (`cluster/liveness.py`), submits (`cluster/intake.py`) and reads (`cluster/reads.py`).
This module assembles them and holds the node's lifecycle: its loops started, the drain, the stop.
"""

import asyncio
import contextlib
import logging

import aiohttp

from jobrunner import errors
from jobrunner.cluster.claiming import Claiming
from jobrunner.cluster.intake import ClusterIntake
from jobrunner.cluster.liveness import Liveness
from jobrunner.cluster.reads import ClusterReads
from jobrunner.jobs import Job

log = logging.getLogger("jobrunner.cluster")


class ClusterService(ClusterIntake, Claiming, Liveness, ClusterReads):
    async def start(self) -> None:
        await super().start()
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=60)
        )
        for name, loop in (
            ("heartbeat", self._heartbeat),
            ("claimer", self._claimer),
            ("lost-nodes", self._reap_lost),
            ("finished-jobs", self._listen),
        ):
            self._spawn(loop(), name)

    async def drain(self) -> None:
        """No new jobs; the running ones finish and are published; the node stays (serving its
        outputs) until every output of its finished jobs was downloaded or has expired, then
        leaves the registry."""
        if self._left:
            return
        if self.accepting:
            log.info("draining: %d job(s) of this node still to finish", self.taken)
        self.accepting = False
        while self.taken:
            await self._slot_freed_or(1.0)
        while any(self._outputs_wanted(job) for job in self.jobs.values()):
            await asyncio.sleep(0.25)
        with contextlib.suppress(errors.ClusterUnavailable):
            await self.registry.leave(self.node_id)
        self._left = True
        log.info("drained: this node has left the cluster")

    def _outputs_wanted(self, job: Job) -> bool:
        return bool(job.outputs) and job.finished and not job.downloaded >= job.outputs.keys()

    async def hand_over(self) -> None:
        """Nothing more to hand over after `drain`: the records are in the store, readable from
        every node, and the drain already waited for this node's outputs to be downloaded."""

    async def stop(self) -> None:
        """Drain, unless a drain has begun: one cancelled by a second signal means at once (this
        waited for the drain again, so a node whose finished jobs had unread outputs ignored
        every further SIGTERM until it was killed). Then the node leaves the registry only if
        nothing of it still runs: with running jobs it goes as a lost node does, and the others
        report those jobs `worker_lost` after `--lost-after`."""
        if self.accepting:
            await self.drain()
        elif not self._left and not self.taken:
            with contextlib.suppress(errors.ClusterUnavailable):
                await self.registry.leave(self.node_id)
            self._left = True
            log.info("stopped at once: this node has left the cluster, unread outputs with it")
        for task in list(self._node_tasks):
            task.cancel()
        await asyncio.gather(*self._node_tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
        await super().stop()
