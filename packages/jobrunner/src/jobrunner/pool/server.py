"""Assembling a running pool from its settings: key, workers, coordinator, app and listener."""

import logging
from pathlib import Path

from jobrunner import logformat
from jobrunner.config import PoolSettings
from jobrunner.node.server import side_apps
from jobrunner.pool.app import build_pool_app
from jobrunner.pool.coordinator import Pool
from jobrunner.pool.workers import Worker, load_workers
from jobrunner.ratelimit import Limits
from jobrunner.signing import WorkerKey
from servekit import Listener, TrustedProxies, serve

log = logging.getLogger("jobrunner.pool")


def run_pool(settings: PoolSettings) -> None:
    logformat.configure(settings.log_format)
    entries = load_workers(Path(settings.workers))
    key = WorkerKey.load_or_create(Path(settings.state_dir) / "pool.key")
    # What a client checks the pool's health answers against (its records are the workers').
    logformat.say(
        settings.log_format, "server.identity", f"worker_id {key.worker_id} (the pool's key)"
    )
    coordinator = Pool(
        [Worker(entry) for entry in entries],
        key,
        Limits(
            settings.rate_concurrent,
            settings.rate_per_hour,
            settings.rate_cpu_seconds,
            ipv6_prefix=settings.rate_ipv6_prefix,
            streams=settings.rate_streams,
        ),
        health_interval=settings.health_interval,
        lost_after=settings.lost_after,
        max_streams=settings.max_streams,
        max_uploads=settings.max_uploads,
        retention=settings.retention,
    )
    app = build_pool_app(coordinator, TrustedProxies(settings.trusted_proxies))
    serve(
        app,
        Listener(settings.host, settings.port, settings.certfile, settings.keyfile),
        graceful_timeout=5,
        write_timeout=settings.write_timeout,
        on_ready=logformat.announcer(settings.log_format, "listening"),
        side=side_apps(settings.metrics, settings.port, settings.log_format, coordinator.metrics),
    )
