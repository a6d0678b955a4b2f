"""Assembling a running server from settings: key, sandbox, service, app and listener."""

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobrunner import logformat
from jobrunner.config import load, metrics_address
from jobrunner.metrics import Metrics
from jobrunner.signing import WorkerKey
from servekit import Listener, SideApp, TrustedProxies, serve

if TYPE_CHECKING:
    from jobrunner.cluster.service import ClusterService

log = logging.getLogger("jobrunner")

UNSAFE_WARNING = (
    "UNSAFE: jobs run without a sandbox (--unsafe-no-sandbox); they can read and "
    "write everything this server's user can. Never expose this server."
)


def run_server(config_file: Path | None = None, **overrides: Any) -> None:
    from jobrunner.node.app import build_app
    from jobrunner.node.service import JobService
    from jobrunner.node.state import Runner
    from jobrunner.sandbox import Sandbox, SandboxUnavailable, privilege

    settings = load(config_file, **overrides)
    logformat.configure(settings.log_format)
    warning = None
    runner: Runner
    if settings.unsafe_no_sandbox:
        from jobrunner.sandbox.unsafe import UnsafeRunner

        runner = UnsafeRunner()
        warning = UNSAFE_WARNING
        if settings.log_format == "json":
            logging.getLogger("jobrunner").warning(warning, extra={"event": "server.unsafe"})
        else:
            print(f"WARNING: {warning}", file=sys.stderr, flush=True)
    else:
        try:
            if privilege.needs_own_namespace():  # rootless: first into a namespace of its own
                privilege.enter_user_namespace()  # re-executes this process there
            runner = Sandbox.find(settings.state, settings.concurrency, settings.jail_uid_base)
        except (SandboxUnavailable, privilege.RootlessUnavailable) as error:
            raise RuntimeError(
                f"no working sandbox: {error}. Refusing to start; --unsafe-no-sandbox runs jobs "
                "without isolation (development only)."
            ) from None
        # One line: root or rootless, and what this mode lacks.
        logformat.say(settings.log_format, "server.sandbox", runner.mode)
    key = WorkerKey.load_or_create(settings.state / "worker.key")
    # What a pool's allowlist and a verifier (`jobrunner verify --worker-id`) need from this host.
    logformat.say(settings.log_format, "server.identity", f"worker_id {key.worker_id}")
    listener = Listener(settings.host, settings.port, settings.certfile, settings.keyfile)
    trusted = TrustedProxies(settings.trusted_proxies)
    announce = logformat.announcer(settings.log_format, "listening")
    service: JobService
    if settings.cluster:
        from jobrunner.cluster.http import build_cluster_app
        from jobrunner.cluster.service import ClusterService
        from jobrunner.cluster.store import Store, connect

        cluster = ClusterService(
            settings, runner, key, Store(connect(settings.cluster)), settings.advertise or ""
        )
        app = build_cluster_app(cluster, trusted, warning)
        announce = _advertiser(cluster, settings.host, announce)
        service = cluster
    else:
        service = JobService(settings, runner, key)
        app = build_app(service, trusted, warning)
    # On SIGTERM the service first drains while the server still answers: submits get 503,
    # accepted jobs get `shutdown_grace` and stay readable; then it serves the finished ones
    # until they are collected or deleted (a pool in front must read their records). Then the
    # listener closes and open connections get a short drain. A second signal skips the waits.
    try:
        serve(
            app,
            listener,
            graceful_timeout=5,
            before_shutdown=service.shutdown,
            write_timeout=settings.write_timeout,
            on_ready=announce,
            side=side_apps(settings.metrics, settings.port, settings.log_format, service.metrics),
        )
    finally:
        if isinstance(runner, Sandbox):
            runner.close()


def _advertiser(
    service: "ClusterService", host: str, announce: Callable[[str], None]
) -> Callable[[str], None]:
    """Once the listener is up: the URL the other nodes reach this one on, if not given, is the
    listener's own, when it is concrete (not a wildcard address)."""

    def ready(url: str) -> None:
        if not service.advertise:
            if host in ("0.0.0.0", "::", ""):  # noqa: S104 (a test of the address, no binding)
                raise ValueError(
                    f"--host {host} is not an address other nodes can reach: give --advertise"
                )
            service.advertise = url.rstrip("/")
        announce(url)

    return ready


def side_apps(
    address: str | None, public_port: int, log_format: logformat.LogFormat, metrics: Metrics
) -> list[SideApp]:
    """The metrics listener, if `--metrics HOST:PORT` asked for one (never the public port)."""
    if address is None:
        return []
    from jobrunner.node.metrics_app import build_metrics_app

    host, port = metrics_address(address, public_port)
    announce = logformat.announcer(log_format, "metrics")
    return [SideApp(build_metrics_app(metrics), Listener(host, port), "metrics", announce)]
