"""The `jobrunner` command line. Commands import their modules lazily so `--help` stays fast."""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobrunner import __version__
from jobrunner.client import commands as client_commands

if TYPE_CHECKING:
    from jobrunner.environments import Environments

F = TypeVar("F", bound=Callable[..., Any])


def _operator_options(command: F) -> F:
    """`--metrics` and `--log-format`, the same on `serve` and `pool`."""
    command = click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        help="The log on stderr: text lines, or one JSON object per line [text].",
    )(command)
    return click.option(
        "--metrics",
        metavar="HOST:PORT",
        help="Serve GET /metrics (Prometheus) on this listener of its own, never the public "
        "port [off].",
    )(command)


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
@click.option(
    "--concurrency",
    type=click.IntRange(0),
    help="Jobs run in parallel [CPU count + 1]; 0 (with --cluster): a front end that runs nothing.",
)
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
@click.option(
    "--rate-cpu-seconds",
    type=float,
    help="CPU seconds per client IP per --rate-cpu-window [10].",
)
@click.option(
    "--rate-cpu-window",
    type=float,
    help="Seconds over which a client IP's CPU seconds are counted [60].",
)
@click.option(
    "--rate-ipv6-prefix",
    type=click.IntRange(0, 128),
    help="IPv6 clients share limits per network of this prefix length [64].",
)
@click.option(
    "--rate-streams",
    type=click.IntRange(1),
    help="Log streams (GET /logs and the WebSocket) and downloads per client IP open at once [8].",
)
@click.option("--max-timeout", type=int, help="Seconds a job may run at most [300].")
@click.option("--max-memory-mb", type=int, help="Memory a job may use at most, in MiB [512].")
@click.option("--storage-mb", type=int, help="Size of a job's work dir (tmpfs), in MiB [100].")
@click.option(
    "--max-entries", type=int, help="Files and directories an upload may hold at most [10000]."
)
@click.option("--max-upload-mb", type=int, help="Size of an upload at most, in MiB [50].")
@click.option("--max-outputs", type=int, help="Output files kept per job at most [1000].")
@click.option("--log-cap-mb", type=int, help="Size of a job's log at most, in MiB [10].")
@click.option(
    "--write-timeout",
    type=click.FloatRange(0.001),
    help="Seconds a client may take nothing it is sent (a download, a log) before it is "
    "dropped [30].",
)
@click.option(
    "--upload-timeout",
    type=float,
    help="Seconds a whole upload may take to arrive and be unpacked (then 408) [60].",
)
@click.option(
    "--follower-stall",
    type=float,
    help="Seconds a live-log reader may take nothing before it is closed (1013) [10].",
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
@click.option(
    "--shutdown-grace",
    type=float,
    help="Seconds the jobs accepted (queued or running) get to finish after SIGTERM; then the "
    "rest are cancelled and finished results served until collected [30].",
)
@click.option("--templates-dir", help="TOML templates that replace packaged ones by name.")
@click.option(
    "--cluster",
    metavar="URL",
    help="redis://HOST:PORT/DB (rediss:// for TLS, redis://user:password@...): this node is "
    "one of the cluster whose queue lives in that Valkey/Redis 7+ [embedded: off].",
)
@click.option(
    "--advertise",
    metavar="URL",
    help="http://HOST:PORT the other nodes reach this one on [the listener's, when concrete].",
)
@click.option(
    "--lost-after",
    type=click.FloatRange(0.1),
    help="Seconds without a heartbeat after which a node's running jobs are worker_lost [10].",
)
@click.option(
    "--cluster-upload-mb",
    type=click.IntRange(1),
    help="MiB of uploads the cluster holds for queued jobs at most (then 503) [1024].",
)
@click.option(
    "--start-after",
    type=click.FloatRange(0),
    help="Seconds a job runs before its node writes its start into the cluster's store; a "
    "job that ends sooner writes only its end [0.25].",
)
@click.option(
    "--jail-uid-base",
    type=click.IntRange(1),
    help="Running jobs are host uids from this one on, one per slot [2000000000].",
)
@_operator_options
@click.option(
    "--unsafe-no-sandbox",
    is_flag=True,
    default=None,
    help="Run jobs WITHOUT isolation (development only; never expose such a server).",
)
def serve(config_file: Path | None, trusted_proxies: tuple[str, ...], **options: Any) -> None:
    """Start the HTTP service."""
    from jobrunner.node.server import run_server

    try:
        run_server(config_file, trusted_proxies=list(trusted_proxies) or None, **options)
    except (ValueError, PermissionError, OSError, RuntimeError) as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)


_cluster_url = click.option(
    "--cluster",
    "url",
    envvar="JOBRUNNER_CLUSTER",
    required=True,
    metavar="URL",
    help="The cluster's Valkey/Redis: redis://HOST:PORT/DB (or $JOBRUNNER_CLUSTER).",
)


@main.group()
def cluster() -> None:
    """The cluster of `jobrunner serve --cluster`: its allowlist of node keys and its state."""


def _in_cluster(url: str, action: Callable[..., Any], *args: Any) -> Any:
    from jobrunner import errors
    from jobrunner.cluster import admin

    try:
        return admin.run(url, lambda store: action(store, *args))
    except errors.ClusterUnavailable as error:
        click.echo(f"jobrunner: {url}: {error}", err=True)
        sys.exit(1)


@cluster.command(name="allow")
@click.argument("key")
@_cluster_url
def cluster_allow(key: str, url: str) -> None:
    """Let the node with this public key (its worker_id, GET /health) take jobs."""
    from jobrunner.cluster import admin

    if not admin.valid_key(key):
        raise click.UsageError(f"not an Ed25519 public key in base64: {key!r}")
    _in_cluster(url, admin.allow, key)
    click.echo(f"allowed: {key}")


@cluster.command(name="deny")
@click.argument("key")
@_cluster_url
def cluster_deny(key: str, url: str) -> None:
    """Take the key off the allowlist: its node takes no more jobs, its records no longer verify."""
    from jobrunner.cluster import admin

    _in_cluster(url, admin.deny, key)
    click.echo(f"denied: {key}")


@cluster.command(name="list")
@_cluster_url
def cluster_list(url: str) -> None:
    """The allowed keys, one a line."""
    from jobrunner.cluster import admin

    for key in _in_cluster(url, admin.listing):
        click.echo(key)


@cluster.command(name="status")
@_cluster_url
def cluster_status(url: str) -> None:
    """The nodes (free slots, lost ones), the queue length and the jobs running."""
    from jobrunner.cluster import admin

    for line in _in_cluster(url, admin.status):
        click.echo(line)


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
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="The server's TOML file of settings (for its state_dir and templates_dir).",
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
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TOML file of the pool's settings (keys as the options, with _ for -).",
)
@click.option(
    "--workers",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML allowlist: [[worker]] url, key (base64 public key), capacity (required).",
)
@click.option("--host", help="Address to listen on [127.0.0.1].")
@click.option("--port", type=int, help="Port to listen on (0: any free port) [8090].")
@click.option(
    "--state-dir", help="Where the pool's own key lives [/var/lib/jobrunner-pool as root]."
)
@click.option("--certfile", help="TLS certificate (PEM): serve HTTPS.")
@click.option("--keyfile", help="TLS private key (PEM).")
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    help="Address or network whose X-Forwarded-For is believed (repeatable).",
)
@click.option(
    "--health-interval",
    type=click.FloatRange(0, min_open=True),
    help="Seconds between signed health challenges to each worker [2].",
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
    "--rate-ipv6-prefix",
    type=click.IntRange(0, 128),
    help="IPv6 clients share limits per network of this prefix length [64].",
)
@click.option(
    "--lost-after",
    type=click.IntRange(1),
    help="Failed health checks in a row before a worker's jobs are reported worker_lost [3].",
)
@click.option(
    "--max-streams",
    type=click.IntRange(1),
    help="Live logs and downloads proxied at once (more are refused, never queued) [1000].",
)
@click.option(
    "--max-uploads",
    type=click.IntRange(1),
    help="Uploads in progress at once (each holds 1 MiB of memory, the rest on disk); "
    "more are refused with 503 [32].",
)
@click.option(
    "--write-timeout",
    type=click.FloatRange(0.001),
    help="Seconds a client may take nothing it is sent (a download, a log) before it is "
    "dropped [30].",
)
@click.option(
    "--retention",
    type=click.FloatRange(0),
    help="Seconds the pool keeps a finished job's status record [600].",
)
@_operator_options
def pool(config_file: Path | None, trusted_proxies: tuple[str, ...], **options: Any) -> None:
    """Run the trusted pool coordinator in front of allowlisted workers. Settings come from
    --config FILE, JOBRUNNER_POOL_<KEY> variables and these options (each beats the one before)."""
    from jobrunner.config import load_pool
    from jobrunner.pool.server import run_pool

    try:
        settings = load_pool(config_file, trusted_proxies=list(trusted_proxies) or None, **options)
        run_pool(settings)
    except (ValueError, PermissionError, OSError) as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)
