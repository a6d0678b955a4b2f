"""What the pool coordinator keeps: its settings, the jobs it routed (to which worker, for which
client, the final record once known), its limiter and counters, and its upstream sessions.

`Pool` is this state in parts, each in a module of its own: the records it vouches for
(`pool/records.py`), dispatching submits (`pool/dispatch.py`), and in `pool/coordinator.py` the
lifecycle, the health checks' consequences and the proxied streams' slots.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from jobrunner.jobs import timestamp
from jobrunner.metrics import PoolMetrics
from jobrunner.pool.workers import Worker
from jobrunner.ratelimit import Limits, RateLimiter
from jobrunner.signing import WorkerKey
from jobrunner.wire import StatusRecord
from servekit import rate_key


@dataclass
class PoolJob:
    job_id: str
    worker: Worker
    client_ip: str
    job_hash: str | None  # as the worker announced it at submit (None: an older worker)
    created_at: str = field(default_factory=timestamp)
    final: StatusRecord | None = None  # the checked record, once finished
    finished_at: float | None = None  # pool clock, for retention

    @property
    def lost(self) -> bool:
        return self.final is not None and self.final.failure == "worker_lost"


@dataclass
class PoolState:
    workers: list[Worker]
    key: WorkerKey
    limits: Limits = field(default_factory=Limits)
    health_interval: float = 2.0
    lost_after: int = 3  # failed health checks in a row before a worker's jobs are lost
    max_streams: int = 1000  # proxied logs (live and plain) and downloads at once
    max_uploads: int = 32  # uploads in progress at once (each: 1 MiB in memory, the rest on disk)
    api_connections: int = 100  # short upstream requests at once
    api_timeout: float = 30.0  # seconds for a short upstream request
    upload_timeout: float = 120.0  # seconds to pass an upload (up to 50 MiB) to a worker
    retention: float = 600.0  # seconds a finished job's record is kept
    clock: Callable[[], float] = time.monotonic
    jobs: dict[str, PoolJob] = field(default_factory=dict)
    metrics: PoolMetrics = field(default_factory=PoolMetrics)

    def __post_init__(self) -> None:
        self.limiter = RateLimiter(self.limits, self.clock)
        self.open_streams = 0
        self.uploads = 0  # admitted submits whose upload is being read or offered to workers
        self.metrics.uploads.set_function(lambda: self.uploads)
        for worker in self.workers:
            self._watch(worker)
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _watch(self, worker: Worker) -> None:
        self.metrics.watch_worker(
            worker.url,
            healthy=lambda: int(worker.healthy),
            active=lambda: worker.active,
            queue_length=lambda: worker.queue_length,
        )

    def client(self, ip: str) -> str:
        """The rate key the limits count `ip` under (IPv6 by its network), as a worker's edge
        derives it; the pool keeps the address itself to forward it to the workers."""
        return rate_key(ip, self.limits.ipv6_prefix)

    def session(self, kind: str) -> aiohttp.ClientSession:
        """`health`, `api` or `streams` (see `pool/coordinator.py`'s docstring)."""
        return self._sessions[kind]
