"""The trusted pool coordinator: one jobrunner interface in front of allowlisted workers.

Workers are listed in a TOML file (URL, Ed25519 public key, capacity). A worker is healthy only
while it signs a fresh challenge with that key, so a server that merely copies a public key is
never used. Each job goes to the least-loaded healthy worker (a refused dispatch is retried on the
next one); every finished result is checked before the pool reports it: signed by the allowlisted
key, for this job id and the job hash the worker announced at submit, with the types the
interface gives. Jobs on a worker that fails several health checks in a row are reported failed
with `worker_lost`. Each finished job's record is kept (for `retention` seconds), so `/status`
still answers once its worker is gone.

Three aiohttp sessions, each with its own connection limit and timeouts, so that one kind of
traffic can never starve another: `health` (the challenges, one connection per worker), `api`
(submit, status, outputs, cancels: short requests) and `streams` (live logs over WebSocket, plain
logs and downloads, which last as long as the client reads, and long polls of `/status?wait=`).
Rate limits apply here, per client IP (IPv6 by network); workers see the client in
`X-Forwarded-For` (the pool must be a trusted proxy).

The pool is `PoolState` (`pool/state.py`) in parts: its workers and their health check
(`pool/workers.py`), the records it vouches for (`pool/records.py`) and the dispatch of submits
(`pool/dispatch.py`). This module assembles them and holds the lifecycle, what failed health
checks mean for a worker's jobs, the proxied streams' slots and the pool-wide reads.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from jobrunner import errors
from jobrunner.pool.dispatch import Dispatch
from jobrunner.pool.records import JobRecords
from jobrunner.pool.workers import Worker, check_health
from jobrunner.ratelimit import StreamSlot
from jobrunner.wire import Quota, Stats, SystemStats
from servekit import descriptors

log = logging.getLogger("jobrunner.pool")


class Pool(Dispatch, JobRecords):
    # --- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        def session(limit: int, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
            return aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=limit), timeout=timeout
            )

        check = max(2.0, self.health_interval)
        self._sessions = {
            "health": session(
                2 * len(self.workers) + 2, aiohttp.ClientTimeout(total=check, sock_connect=check)
            ),
            "api": session(
                self.api_connections,
                aiohttp.ClientTimeout(total=self.api_timeout, sock_connect=5),
            ),
            # No total: a download or a live log lasts as long as the client reads. A worker that
            # stops sending is caught by sock_read (downloads) and heartbeats (WebSockets).
            "streams": session(
                self.max_streams, aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=60)
            ),
        }
        await self.check_all()
        self._tasks = [
            asyncio.create_task(self._every(self.check_all), name="pool-health"),
            asyncio.create_task(self._every(self._follow_jobs), name="pool-jobs"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for session in self._sessions.values():
            await session.close()
        log.info("stopped", extra={"event": "server.stopped"})

    async def _every(self, action: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await action()
            except Exception:
                log.exception("pool %s failed", getattr(action, "__name__", "task"))

    # --- worker health ----------------------------------------------------------------------------

    async def check_all(self) -> None:
        await asyncio.gather(*(self._check(worker) for worker in self.workers))

    async def _check(self, worker: Worker) -> None:
        await check_health(self.session("health"), worker)
        if worker.failed_checks >= self.lost_after:
            self._lose_jobs(worker)

    # --- proxied streams --------------------------------------------------------------------------

    def open_stream(self, client_ip: str) -> StreamSlot:
        """A slot for one proxied stream (a log or a download) of this client, or 429 (see
        `RateLimiter`); 503 while the pool is short of open files."""
        if descriptors.running_low():
            raise errors.short_of_files()
        slot = self.limiter.open_stream(self.client(client_ip))
        if not isinstance(slot, StreamSlot):
            raise errors.rate_limited(slot)
        return slot

    def open_proxied(self, client_ip: str) -> Callable[[], None]:
        """Both slots of a plain proxied stream (a log or a download): the client's (429) and one
        of the pool's `max_streams` (503 when all are taken: never queued behind the streams
        session's connections). Returns what gives both back (once)."""
        if self.open_streams >= self.max_streams:
            raise errors.Busy(
                f"{self.open_streams} streams proxied at once; try again shortly",
                short_of="streams",
            )
        slot = self.open_stream(client_ip)
        self.open_streams += 1
        released = False

        def close() -> None:
            nonlocal released
            if not released:
                released = True
                self.open_streams -= 1
                slot.close()

        return close

    # --- pool-wide reads --------------------------------------------------------------------------

    async def environments(self) -> tuple[int, bytes]:
        for worker in self.workers:
            if not worker.healthy:
                continue
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self.session("api").get(f"{worker.url}/environments") as reply:
                    return reply.status, await reply.read()
        raise errors.NoWorkerAvailable("no healthy worker in the pool")

    def stats(self, client_ip: str) -> Stats:
        verdict = self.limiter.verdict(self.client(client_ip))
        limit = self.limits.cpu_seconds
        return Stats(
            Quota(
                used=verdict.cpu_used,
                limit=limit,
                available=round(max(0.0, limit - verdict.cpu_used), 3),
                active_jobs=verdict.active,
                can_submit=verdict.allowed,
                reason=verdict.reason,
                retry_after=verdict.retry_after,
            ),
            SystemStats(
                queue_length=sum(w.queue_length for w in self.workers if w.healthy),
                active_jobs=sum(w.active for w in self.workers),
            ),
        )
