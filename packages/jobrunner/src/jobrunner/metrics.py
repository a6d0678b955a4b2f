"""The numbers an operator scrapes from `GET /metrics`: every metric of one server (a worker or a
pool) in a registry of its own, so that several servers in one process (tests) never share one.

The service and the pool update them through the few methods here; nothing in this module knows
HTTP. Gauges that mirror state the server holds anyway (queue length, running jobs, worker
health) are read when scraped (`set_function`) instead of being kept in step at every change.
The names, types and labels are an interface: the README lists each one.
"""

from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Seconds. Queue waits run from nothing to the length of a long queue; run times up to the
# largest `max_timeout`; setting a sandbox up is milliseconds unless the host is in trouble.
QUEUE_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
RUN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
SETUP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
STREAM_KINDS = ("log", "websocket", "download")
# What `generate_latest` writes: every name here is a classic one, so the exposition is the text
# format 0.0.4 that every Prometheus reads (prometheus_client 0.26 labels it 1.0.0 by default).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """What a worker and the pool both count: refusals, bytes in and out, open streams and
    finished jobs."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Read before each scrape: gauges of state held elsewhere (a cluster's store).
        self.before_scrape: Callable[[], Awaitable[None]] | None = None
        r = self.registry
        self.refusals = Counter(
            "jobrunner_refusals", "Requests refused, by reason.", ["reason"], registry=r
        )
        self.uploaded = Counter(
            "jobrunner_uploaded_bytes", "Bytes of POST /submit bodies received.", registry=r
        )
        self.downloaded = Counter(
            "jobrunner_downloaded_bytes",
            "Bytes of output downloads (GET /download) sent.",
            registry=r,
        )
        self.streams = Gauge(
            "jobrunner_open_streams",
            "Log streams (plain, WebSocket) and downloads open now.",
            ["kind"],
            registry=r,
        )
        for kind in STREAM_KINDS:
            self.streams.labels(kind)  # present (as 0) before the first one opens
        self.finished = Counter(
            "jobrunner_jobs_finished",
            "Jobs finished, by status (completed, failed) and failure (empty when completed).",
            ["status", "failure"],
            registry=r,
        )

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()

    def stream_opened(self, kind: str) -> Callable[[], None]:
        """Count one open stream of `kind`; the function returned counts it closed (once)."""
        gauge = self.streams.labels(kind)
        gauge.inc()
        closed = False

        def close() -> None:
            nonlocal closed
            if not closed:
                closed = True
                gauge.dec()

        return close

    def counted(self, kind: str, close: Callable[[], None]) -> Callable[[], None]:
        """`close` of a stream's slot, made to count the stream of `kind` closed too."""
        uncount = self.stream_opened(kind)

        def close_both() -> None:
            close()
            uncount()

        return close_both

    def job_finished(self, status: str, failure: str | None) -> None:
        self.finished.labels(status, failure or "").inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (version 0.0.4)."""
        return generate_latest(self.registry)


class WorkerMetrics(Metrics):
    """A worker's: besides the common ones, its jobs from accepted to finished."""

    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.accepted = Counter("jobrunner_jobs_accepted", "Jobs accepted (queued).", registry=r)
        self.queue_wait = Histogram(
            "jobrunner_job_queue_wait_seconds",
            "Seconds from a job's acceptance to the start of its run.",
            buckets=QUEUE_WAIT_BUCKETS,
            registry=r,
        )
        self.run_time = Histogram(
            "jobrunner_job_run_seconds",
            "Seconds from a job's start to its end (set-up, run and output collection).",
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.sandbox_setup = Histogram(
            "jobrunner_sandbox_setup_seconds",
            "Seconds to set a job's sandbox up (work dir, inputs, cgroups) before it starts.",
            buckets=SETUP_BUCKETS,
            registry=r,
        )
        self.queue_length = Gauge("jobrunner_queue_length", "Jobs waiting to run.", registry=r)
        self.running = Gauge("jobrunner_running_jobs", "Jobs running now.", registry=r)
        self.slots = Gauge("jobrunner_slots", "Jobs that may run at once.", registry=r)
        self.accepting = Gauge(
            "jobrunner_accepting", "1 while submits are accepted, 0 once draining.", registry=r
        )

    def watch(
        self,
        queue_length: Callable[[], float],
        running: Callable[[], float],
        slots: Callable[[], float],
        accepting: Callable[[], float],
    ) -> None:
        """Where the gauges read the service's state when scraped."""
        self.queue_length.set_function(queue_length)
        self.running.set_function(running)
        self.slots.set_function(slots)
        self.accepting.set_function(accepting)

    def watch_cluster(self, running: Callable[[], float]) -> None:
        """A cluster node's: the jobs claimed or running on any node (its `queue_length` is the
        cluster's queue, its `running_jobs` its own)."""
        gauge = Gauge(
            "jobrunner_cluster_running_jobs",
            "Jobs claimed or running on any node of the cluster.",
            registry=self.registry,
        )
        gauge.set_function(running)

    def job_started(self, waited: float) -> None:
        self.queue_wait.observe(waited)

    def job_ran(self, seconds: float, setup_seconds: float | None) -> None:
        self.run_time.observe(seconds)
        if setup_seconds is not None:
            self.sandbox_setup.observe(setup_seconds)


class PoolMetrics(Metrics):
    """The pool's: besides the common ones, each worker's health and load and the dispatches."""

    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        self.worker_healthy = Gauge(
            "jobrunner_pool_worker_healthy",
            "1 while the worker passes its signed health check, else 0.",
            ["worker"],
            registry=r,
        )
        self.worker_active = Gauge(
            "jobrunner_pool_worker_active_jobs",
            "Jobs the pool has on the worker and not seen finish.",
            ["worker"],
            registry=r,
        )
        self.worker_queue = Gauge(
            "jobrunner_pool_worker_queue_length",
            "The worker's queue length at its last health check.",
            ["worker"],
            registry=r,
        )
        self.dispatches = Counter(
            "jobrunner_pool_dispatches",
            "Submits offered to a worker, by worker and outcome (accepted, refused, "
            "unreachable, invalid: the request itself was wrong).",
            ["worker", "outcome"],
            registry=r,
        )
        self.uploads = Gauge(
            "jobrunner_pool_uploads", "Uploads being received or passed on now.", registry=r
        )

    def watch_worker(
        self,
        url: str,
        healthy: Callable[[], float],
        active: Callable[[], float],
        queue_length: Callable[[], float],
    ) -> None:
        self.worker_healthy.labels(url).set_function(healthy)
        self.worker_active.labels(url).set_function(active)
        self.worker_queue.labels(url).set_function(queue_length)

    def dispatched(self, url: str, outcome: str) -> None:
        self.dispatches.labels(url, outcome).inc()
