"""A cluster node's reads: any job's status (from the store, or this node's own record while it
runs it here), its long poll woken by the store's `done` channel, cancels wherever the job is,
the node that holds a job's outputs, `/stats` and `GET /` over the whole cluster.

Separate from claiming and liveness: these answer requests and change nothing of the cluster but
a cancel.
"""

import asyncio
import contextlib
import logging
import time
from typing import Any

import aiohttp
import msgspec
from redis.exceptions import RedisError
from yarl import URL

from jobrunner import errors, vouching
from jobrunner.cluster.state import BEAT, ClusterState
from jobrunner.cluster.store import text
from jobrunner.signing import FINISHED
from jobrunner.wire import ServerInfo, Stats, StatusRecord, SystemStats, decode_status

log = logging.getLogger("jobrunner.cluster")
_encode = msgspec.json.encode
# A status request waiting for a job another node runs wakes at the job's end (the store's
# `done` channel) and looks again every RECHECK seconds anyway (the channel lost meanwhile).
RECHECK = 1.0


class ClusterReads(ClusterState):
    async def _listen(self) -> None:
        """Every job that finishes in the cluster is published on the store's `done` channel:
        wake the status requests waiting for it here. Lost messages (the store away) only
        delay them to their next look (RECHECK)."""
        channel = self.store.key("done")
        while True:
            pubsub: Any = self.store.client.pubsub()  # redis-py leaves aclose untyped
            try:
                await pubsub.subscribe(channel)
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=RECHECK
                    )
                    if message is not None:
                        self._changed(text(message["data"]))
            except (RedisError, OSError):
                await asyncio.sleep(BEAT)
            finally:
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()

    def info(self, warning: str | None = None) -> ServerInfo:
        """The embedded mode's answer, saying what differs in a cluster: where the queue and the
        records live, what this node does, and the cluster's queue as of `refresh_view`."""
        s = self.settings
        role = f"runs up to {s.concurrency} job(s) at once" if s.concurrency else "runs no job"
        _, queued, running = self._view
        return msgspec.structs.replace(
            super().info(warning),
            description="Anonymous job execution on a cluster of nodes: send a gzip tarball "
            "and a JSON manifest to any node; the job waits in the cluster's one queue, runs "
            "in an nsjail sandbox on the first node with a free slot, and any node serves its "
            f"status, log and outputs. This node {role}; the cluster has {queued} job(s) "
            f"queued and {running} claimed or running.",
            privacy=f"No accounts. Jobs and their files are deleted "
            f"{s.delete_after_download:g} s after every output has been downloaded, and at "
            f"the latest {s.retention:g} s after they finish. The queue, the status records, "
            "the logs and the rate-limit counters live in the cluster's store (Valkey/Redis), "
            "not in one server's memory: queued jobs survive the loss of any node, and a node "
            "that stops takes no new job and finishes its running ones first. A job's outputs "
            "stay on the node that ran it. Client IP addresses are kept in the store only as "
            "long as the rate-limit windows and the job records need them.",
        )

    async def allowed(self) -> set[str]:
        """The allowlist, read at most once a second."""
        at, keys = self._allowed
        if time.monotonic() - at > 1.0:
            keys = await self.registry.allowed()
            self._allowed = (time.monotonic(), keys)
        return keys

    async def fields(self, job_id: str) -> dict[str, bytes]:
        self.store.check()
        found = await self.cq.job(job_id)
        if not found and job_id not in self.jobs:
            raise errors.job_not_found(job_id)
        return found

    async def cluster_status(self, job_id: str) -> StatusRecord:
        fields = await self.fields(job_id)
        state = text(fields.get("state", b""))
        local = self.jobs.get(job_id)
        if state == "finished":
            return await self._vouched(job_id, fields)
        if local is not None and not (state == "claimed" and not local.finished):
            return self._record(local)
        # Not started as far as the cluster knows (`--start-after`): read as every node reads it,
        # so that `running` anywhere means a start the store holds (a node lost then loses the
        # job, `worker_lost`, instead of queueing it again).
        record = decode_status(fields["record"])
        if state == "queued":
            return msgspec.structs.replace(record, position=await self.cq.position(job_id))
        if state == "claimed":
            return msgspec.structs.replace(record, position=0)
        return record

    async def _vouched(self, job_id: str, fields: dict[str, bytes]) -> StatusRecord:
        record = decode_status(fields["record"])
        job_hash = text(fields.get("hash", b"")) or None
        found = vouching.problem(record, await self.allowed(), job_id, job_hash)
        if found is None:
            return record
        log.warning("job %s: its record does not verify: %s", job_id, found)
        return vouching.own_record(self.key, job_id, job_hash, record.created_at, "bad_signature")

    async def cluster_wait(self, job_id: str, seconds: float) -> StatusRecord:
        deadline = time.monotonic() + seconds
        while True:
            with self._watching(job_id) as changed:
                record = await self.cluster_status(job_id)
                if record.status in FINISHED or time.monotonic() >= deadline:
                    return record
                local = self.jobs.get(job_id)
                if local is not None:  # this node runs it: its own signed record, once final
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                            await local.done.wait()
                    return self._record(local)
                wait = min(RECHECK, max(0.0, deadline - time.monotonic()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), wait)

    async def cluster_cancel(self, job_id: str) -> StatusRecord:
        fields = await self.fields(job_id)
        state = text(fields.get("state", b""))
        if job_id in self.jobs and state != "finished":
            record = await self.cancel_job(job_id)
            return record
        if state == "queued":
            queued = decode_status(fields["record"])
            record = vouching.own_record(
                self.key, job_id, queued.job_hash, queued.created_at, "cancelled"
            )
            if await self.cq.finish(job_id, "", _encode(record)):
                await self.logs.end(job_id, "failed")
                return record
            return await self.cluster_cancel(job_id)  # claimed meanwhile
        if state in ("claimed", "running"):
            return await self._cancel_remote(job_id, text(fields.get("url", b"")))
        record = await self.cluster_status(job_id)
        raise errors.job_finished(job_id, str(record.status), record.failure)

    async def _cancel_remote(self, job_id: str, url: str) -> StatusRecord:
        if not url or url == self.advertise or self.session is None:
            raise errors.WorkerUnreachable("the job's node cannot be reached")
        target = URL(f"{url}/jobs/{job_id}", encoded=True)
        try:
            async with self.session.delete(target) as reply:
                raw = await reply.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise errors.WorkerUnreachable(type(error).__name__) from None
        if reply.status == 409:
            record = await self.cluster_status(job_id)
            raise errors.job_finished(job_id, str(record.status), record.failure)
        if reply.status != 200:
            raise errors.WorkerUnreachable(f"status {reply.status}")
        return decode_status(raw)

    async def node_of(self, job_id: str) -> str | None:
        """The URL of the node that holds the job's outputs (None: this one, or none yet)."""
        fields = await self.fields(job_id)
        url = text(fields.get("url", b""))
        if job_id in self.jobs or not url:
            return None
        if url == self.advertise:
            raise errors.job_not_found(job_id)  # this node ran it, and has forgotten it
        return url

    async def cluster_stats(self, client: str) -> Stats:
        self.store.check()
        verdict = await self.climits.verdict(client)
        quota = self.quota(verdict)
        running = len(await self.cq.running())
        return Stats(quota, SystemStats(queue_length=await self.cq.length(), active_jobs=running))
