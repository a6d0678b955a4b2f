"""A cluster node's state, over the embedded `JobService`'s: the store and what the node keeps of
the cluster (its queue, limits, registry and logs in the store, the jobs it has claimed, the
status requests waiting here, its view of the cluster's queue), and the few helpers every part of
the node uses: its tasks, the store's outages waited out, the waiting status requests woken.

`ClusterService` is this state in parts, each in a module of its own: claiming and running the
cluster's jobs (`cluster/claiming.py`), the heartbeat and lost nodes (`cluster/liveness.py`),
submits (`cluster/intake.py`) and reads (`cluster/reads.py`).
"""

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import aiohttp

from jobrunner import errors
from jobrunner.cluster.limits import ClusterLimits
from jobrunner.cluster.logs import LogStreams
from jobrunner.cluster.queue import ClusterQueue
from jobrunner.cluster.registry import Registry
from jobrunner.cluster.store import Store
from jobrunner.config import Settings
from jobrunner.jobs import Job
from jobrunner.metrics import WorkerMetrics
from jobrunner.node.service import JobService
from jobrunner.node.state import Runner
from jobrunner.signing import WorkerKey

T = TypeVar("T")
BEAT = 0.5  # seconds between two heartbeats


class ClusterState(JobService):
    def __init__(
        self,
        settings: Settings,
        runner: Runner,
        key: WorkerKey,
        store: Store,
        advertise: str = "",
        metrics: WorkerMetrics | None = None,
    ) -> None:
        super().__init__(settings, runner, key, metrics=metrics)
        self.store = store
        self.advertise = advertise
        self.node_id = key.worker_id
        self.cq = ClusterQueue(
            store, settings.fair_window, settings.retention, settings.rate_cpu_window
        )
        # The embedded limiter's limits (the same settings; frozen), counted in the store instead.
        self.climits = ClusterLimits(store, self.limiter.limits)
        self.registry = Registry(store, settings.lost_after)
        self.logs = LogStreams(store)
        self.taken = 0  # jobs claimed by this node and not yet published as finished
        self._slot_freed = asyncio.Event()
        self._node_tasks: set[asyncio.Task[None]] = set()
        self._allowed: tuple[float, set[str]] = (0.0, set())
        self._watchers: dict[str, set[asyncio.Event]] = {}  # job id -> status requests waiting
        # A submit's checked files (`submit_cluster`, with a slot free when it came), kept until
        # its answer is out: this node's claim of the job meanwhile runs them (`_took`) rather
        # than unpacking the upload again into the same place; after that, what is being removed,
        # which such a claim waits for (`_unpack_claimed`).
        self._checked: dict[str, Job] = {}
        self._scrapping: dict[str, asyncio.Task[None]] = {}
        self.session: aiohttp.ClientSession | None = None
        self._left = False  # drained and out of the registry
        # The cluster's queue length and jobs claimed or running, read from the store at most
        # once a second, for /metrics and GET /.
        self._view: tuple[float, int, int] = (-1.0, 0, 0)
        self.metrics.watch(
            queue_length=lambda: self._view[1],
            running=lambda: self.running,
            slots=lambda: settings.concurrency,
            accepting=lambda: int(self.accepting),
        )
        self.metrics.watch_cluster(running=lambda: self._view[2])
        self.metrics.before_scrape = self.refresh_view

    def _spawn(self, work: Awaitable[None], name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._node_tasks.add(task)
        task.add_done_callback(self._node_tasks.discard)
        return task

    async def _slot_freed_or(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._slot_freed.wait(), seconds)
        self._slot_freed.clear()

    async def _persist(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()` once the store answers: a node's own facts are never dropped for an outage."""
        while True:
            with contextlib.suppress(errors.ClusterUnavailable):
                return await work()
            await asyncio.sleep(BEAT)

    def _changed(self, job_id: str) -> None:
        for event in self._watchers.pop(job_id, ()):
            event.set()

    @contextlib.contextmanager
    def _watching(self, job_id: str) -> Iterator[asyncio.Event]:
        """An event set when the job finishes anywhere or this node claims it."""
        event = asyncio.Event()
        self._watchers.setdefault(job_id, set()).add(event)
        try:
            yield event
        finally:
            waiting = self._watchers.get(job_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._watchers[job_id]

    async def refresh_view(self) -> None:
        """The cluster's queue length and jobs claimed or running, if a second old (kept as
        they were while the store is away)."""
        if time.monotonic() - self._view[0] < 1.0 or not self.store.healthy:
            return
        with contextlib.suppress(errors.ClusterUnavailable):
            queued, running = await self.cq.counts()
            self._view = (time.monotonic(), queued, running)
