"""The `jobrunner` command line. Commands import their modules lazily so `--help` stays fast."""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobrunner import __version__, client_commands

if TYPE_CHECKING:
    from jobrunner.environments import Environments

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jobrunner")
def main() -> None:
    """Run uploaded jobs in an nsjail sandbox behind an anonymous HTTP interface."""


@main.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML file of settings (keys as in the README).",
)
@click.option("--host", help="Address to listen on [127.0.0.1].")
@click.option("--port", type=int, help="Port to listen on (0: any free port) [8080].")
@click.option("--state-dir", help="Where keys, environments and job files live.")
@click.option("--concurrency", type=click.IntRange(1), help="Jobs run in parallel [CPU count].")
@click.option("--certfile", help="TLS certificate (PEM): serve HTTPS.")
@click.option("--keyfile", help="TLS private key (PEM).")
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    help="Address or network whose X-Forwarded-For is believed (repeatable).",
)
@click.option("--rate-concurrent", type=int, help="Concurrent jobs per client IP [2].")
@click.option("--rate-per-hour", type=int, help="Accepted submits per client IP per hour [20].")
@click.option("--rate-cpu-seconds", type=float, help="CPU seconds per client IP per minute [10].")
@click.option(
    "--rate-streams",
    type=click.IntRange(1),
    help="Log streams (GET /logs and the WebSocket) and downloads per client IP open at once [8].",
)
@click.option(
    "--write-timeout",
    type=click.FloatRange(0.001),
    help="Seconds a client may take nothing it is sent (a download, a log) before it is "
    "dropped [30].",
)
@click.option(
    "--fair-window",
    type=click.FloatRange(0.001),
    help="Seconds of slot time that count when the queue picks the next client [600].",
)
@click.option(
    "--reserved-slots",
    type=click.IntRange(0),
    help="Slots kept for short jobs while short clients are about [all but a quarter].",
)
@click.option(
    "--short-job",
    type=click.FloatRange(0),
    help="Seconds a short job's time limit, or its client's average, is at most [5].",
)
@click.option(
    "--max-queue",
    type=click.IntRange(1),
    help="Jobs queued at most; a submit beyond it is refused with 503 [1000].",
)
@click.option("--retention", type=float, help="Seconds a finished job is kept at most [600].")
@click.option(
    "--delete-after-download",
    type=float,
    help="Seconds a job is kept once every output was downloaded [60].",
)
@click.option("--templates-dir", help="TOML templates that replace packaged ones by name.")
@click.option(
    "--jail-uid-base",
    type=click.IntRange(1),
    help="Running jobs are host uids from this one on, one per slot [2000000000].",
)
@click.option(
    "--unsafe-no-sandbox",
    is_flag=True,
    default=None,
    help="Run jobs WITHOUT isolation (development only; never expose such a server).",
)
def serve(config_file: Path | None, trusted_proxies: tuple[str, ...], **options: Any) -> None:
    """Start the HTTP service."""
    from jobrunner.server import run_server

    try:
        run_server(config_file, trusted_proxies=list(trusted_proxies) or None, **options)
    except (ValueError, PermissionError, OSError, RuntimeError) as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)


@main.group()
def env() -> None:
    """Environment templates: list them, build them ahead of first use."""


def _environments(
    config_file: Path | None, state_dir: str | None, templates_dir: str | None
) -> "Environments":
    from jobrunner.config import load
    from jobrunner.environments import Environments
    from jobrunner.sandbox.layout import Layout

    settings = load(config_file, state_dir=state_dir, templates_dir=templates_dir)
    folder = Path(settings.templates_dir) if settings.templates_dir else None
    # Where the sandboxed server of this state dir keeps them (see sandbox/layout.py).
    return Environments(Layout.for_state(settings.state).envs, templates_dir=folder)


_env_options = [
    click.option(
        "--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path)
    ),
    click.option("--state-dir", help="The server's state dir."),
    click.option("--templates-dir", help="TOML templates that replace packaged ones by name."),
]


def _with_env_options(function: F) -> F:
    for option in reversed(_env_options):
        function = option(function)
    return function


@env.command(name="list")
@_with_env_options
def env_list(config_file: Path | None, state_dir: str | None, templates_dir: str | None) -> None:
    """Every template, whether it is built here, and its packages (no server is asked)."""
    environments = _environments(config_file, state_dir, templates_dir)
    # Local facts only: say so, since `jobrunner` otherwise talks to $JOBRUNNER_SERVER.
    click.echo(
        f"Environment templates of this installation, built under {environments.root} "
        "(a server's own list: GET /environments):"
    )
    for name, template in environments.templates.items():
        state = "built" if environments.built(name) else "not built"
        click.echo(f"{name:<13} {state:<9}  {template.description}")
        if template.packages:
            click.echo(f"{'':<25}{', '.join(template.packages)}")


@env.command(name="build")
@click.argument("names", nargs=-1)
@click.option("--all", "build_all", is_flag=True, help="Every template.")
@_with_env_options
def env_build(
    names: tuple[str, ...],
    build_all: bool,
    config_file: Path | None,
    state_dir: str | None,
    templates_dir: str | None,
) -> None:
    """Build templates now, so that the first job using them does not wait."""
    from jobrunner.environments import TEMPLATES, EnvironmentUnavailable

    environments = _environments(config_file, state_dir, templates_dir)
    chosen = list(TEMPLATES) if build_all else list(names)
    unknown = [name for name in chosen if name not in TEMPLATES]
    if not chosen or unknown:
        raise click.UsageError(f"name templates to build ({', '.join(TEMPLATES)}) or --all")
    environments.root.mkdir(parents=True, exist_ok=True)
    failed = False
    for name in chosen:
        try:
            path = environments.build(name)
            click.echo(f"built {name}: {path}")
        except EnvironmentUnavailable as error:
            click.echo(f"jobrunner: {error}", err=True)
            failed = True
    sys.exit(1 if failed else 0)


# --- the client: talking to a server (or a pool) -----------------------------------------------

for _command in client_commands.COMMANDS:  # submit, status, logs, outputs, download, verify
    main.add_command(_command)


@main.command()
@click.option(
    "--workers",
    "workers_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML allowlist: [[worker]] url, key (base64 public key), capacity.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8090, show_default=True)
@click.option("--state-dir", help="Where the pool's own key lives.")
@click.option("--certfile", help="TLS certificate (PEM).")
@click.option("--keyfile", help="TLS private key (PEM).")
@click.option("--trusted-proxy", "trusted_proxies", multiple=True)
@click.option(
    "--health-interval",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds between signed health challenges to each worker.",
)
@click.option("--rate-concurrent", type=int, default=2, show_default=True)
@click.option("--rate-per-hour", type=int, default=20, show_default=True)
@click.option("--rate-cpu-seconds", type=float, default=10.0, show_default=True)
@click.option(
    "--rate-streams",
    type=click.IntRange(1),
    default=8,
    show_default=True,
    help="Log streams (GET /logs and the WebSocket) and downloads per client IP open at once.",
)
@click.option(
    "--rate-ipv6-prefix",
    type=click.IntRange(0, 128),
    default=64,
    show_default=True,
    help="IPv6 clients share limits per network of this prefix length.",
)
@click.option(
    "--lost-after",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Failed health checks in a row before a worker's jobs are reported worker_lost.",
)
@click.option(
    "--max-streams",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="Live logs and downloads proxied at once (more are refused, never queued).",
)
@click.option(
    "--max-uploads",
    type=click.IntRange(1),
    default=32,
    show_default=True,
    help="Uploads in progress at once (each holds 1 MiB of memory, the rest on disk); "
    "more are refused with 503.",
)
@click.option(
    "--write-timeout",
    type=click.FloatRange(0.001),
    default=30.0,
    show_default=True,
    help="Seconds a client may take nothing it is sent (a download, a log) before it is dropped.",
)
@click.option(
    "--retention",
    type=click.FloatRange(0),
    default=600.0,
    show_default=True,
    help="Seconds the pool keeps a finished job's status record.",
)
def pool(
    workers_file: Path,
    host: str,
    port: int,
    state_dir: str | None,
    certfile: str | None,
    keyfile: str | None,
    trusted_proxies: tuple[str, ...],
    health_interval: float,
    rate_concurrent: int,
    rate_per_hour: int,
    rate_cpu_seconds: float,
    rate_streams: int,
    rate_ipv6_prefix: int,
    lost_after: int,
    max_streams: int,
    max_uploads: int,
    write_timeout: float,
    retention: float,
) -> None:
    """Run the trusted pool coordinator in front of allowlisted workers."""
    import logging

    from jobrunner.config import default_state_dir
    from jobrunner.pool import Pool, Worker, load_workers
    from jobrunner.pool_app import build_pool_app
    from jobrunner.ratelimit import Limits
    from jobrunner.signing import WorkerKey
    from servekit import Listener, TrustedProxies, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        entries = load_workers(workers_file)
        state = Path(state_dir or default_state_dir() + "-pool")
        key = WorkerKey.load_or_create(state / "pool.key")
        coordinator = Pool(
            [Worker(entry) for entry in entries],
            key,
            Limits(
                rate_concurrent,
                rate_per_hour,
                rate_cpu_seconds,
                ipv6_prefix=rate_ipv6_prefix,
                streams=rate_streams,
            ),
            health_interval=health_interval,
            lost_after=lost_after,
            max_streams=max_streams,
            max_uploads=max_uploads,
            retention=retention,
        )
        app = build_pool_app(coordinator, TrustedProxies(trusted_proxies))
        serve(
            app,
            Listener(host, port, certfile, keyfile),
            graceful_timeout=5,
            write_timeout=write_timeout,
        )
    except (ValueError, PermissionError, OSError) as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)
