"""The `jobrunner` command line. Commands import their modules lazily so `--help` stays fast."""

import sys
from pathlib import Path

import click

from jobrunner import __version__


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
@click.option("--retention", type=float, help="Seconds a finished job is kept at most [600].")
@click.option(
    "--delete-after-download",
    type=float,
    help="Seconds a job is kept once every output was downloaded [60].",
)
@click.option("--templates-dir", help="TOML templates that replace packaged ones by name.")
@click.option(
    "--unsafe-no-sandbox",
    is_flag=True,
    default=None,
    help="Run jobs WITHOUT isolation (development only; never expose such a server).",
)
def serve(config_file: Path | None, trusted_proxies: tuple[str, ...], **options) -> None:
    """Start the HTTP service."""
    from jobrunner.server import run_server

    try:
        run_server(config_file, trusted_proxies=list(trusted_proxies) or None, **options)
    except (ValueError, PermissionError, OSError, RuntimeError) as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)


@main.command()
@click.argument("record", type=click.File("rb"), default="-")
@click.option("--worker-id", help="Only accept a signature by this worker key (base64).")
def verify(record, worker_id: str | None) -> None:
    """Check the signature of a status record (a file or - for standard input)."""
    import msgspec

    from jobrunner.signing import verify_record

    try:
        data = msgspec.json.decode(record.read())
    except msgspec.DecodeError as error:
        click.echo(f"jobrunner: not a JSON status record: {error}", err=True)
        sys.exit(2)
    if not isinstance(data, dict) or not verify_record(data, worker_id):
        click.echo("signature INVALID", err=True)
        sys.exit(1)
    click.echo(
        f"signature valid: job {data['job_id']} {data['status']} by worker "
        f"{data['worker_metadata']['worker_id']}"
    )


@main.group()
def env() -> None:
    """Environment templates: list them, build them ahead of first use."""


def _environments(config_file: Path | None, state_dir: str | None, templates_dir: str | None):
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


def _with_env_options(function):
    for option in reversed(_env_options):
        function = option(function)
    return function


@env.command(name="list")
@_with_env_options
def env_list(config_file, state_dir, templates_dir) -> None:
    """Every template, whether it is built, and its packages."""
    environments = _environments(config_file, state_dir, templates_dir)
    for name, template in environments.templates.items():
        state = "built" if environments.built(name) else "not built"
        click.echo(f"{name:<13} {state:<9}  {template.description}")
        if template.packages:
            click.echo(f"{'':<25}{', '.join(template.packages)}")


@env.command(name="build")
@click.argument("names", nargs=-1)
@click.option("--all", "build_all", is_flag=True, help="Every template.")
@_with_env_options
def env_build(names, build_all, config_file, state_dir, templates_dir) -> None:
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

server_option = click.option(
    "--server",
    envvar="JOBRUNNER_SERVER",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The jobrunner server or pool [$JOBRUNNER_SERVER].",
)


def _client_call(server: str, action):
    """Run `action(client)` against the server; its errors become one line and exit 1."""
    import asyncio

    from jobrunner.client import Client, JobrunnerError

    async def run():
        async with Client(server) as client:
            return await action(client)

    try:
        return asyncio.run(run())
    except JobrunnerError as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)
    except OSError as error:  # aiohttp's connection errors are OSErrors
        click.echo(f"jobrunner: cannot reach the server: {error}", err=True)
        sys.exit(1)


@main.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--entrypoint", "-e", help="File to run [PATH's name, or main.py in a directory].")
@click.option("--interpreter", help="python, bash or node [by extension].")
@click.option("--environment", help="Template name [default].")
@click.option("--arg", "args", multiple=True, help="An argument for the entrypoint (repeatable).")
@click.option("--follow", "-f", is_flag=True, help="Show the log live until the job ends.")
@click.option(
    "--download",
    "download_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Download every output into this directory when the job ends.",
)
@server_option
def submit(path, entrypoint, interpreter, environment, args, follow, download_dir, server):
    """Pack PATH (a directory or a file), run it, and optionally follow and download it."""
    from jobrunner.client import Client, verify

    if entrypoint is None:
        if path.is_file():
            entrypoint = path.name
        elif (path / "main.py").exists():
            entrypoint = "main.py"
        else:
            raise click.UsageError("give --entrypoint (no main.py in the directory)")

    async def run(client: Client):
        job = await client.submit(
            path,
            entrypoint=entrypoint,
            interpreter=interpreter,
            environment=environment,
            args=args,
        )
        click.echo(f"job {job.job_id} queued (position {job.position})", err=True)
        if not (follow or download_dir):
            click.echo(job.job_id)
            return 0
        if follow:
            async for text in client.follow(job.job_id):
                click.echo(text, nl=False)
        record = await client.wait(job.job_id)
        failure = f" ({record.failure})" if record.failure else ""
        click.echo(
            f"job {record.job_id} {record.status}{failure}, exit code "
            f"{record.execution_metadata.exit_code}, "
            f"{record.execution_metadata.cpu_seconds} CPU-s",
            err=True,
        )
        if download_dir is not None:
            for saved in await client.download_all(job.job_id, download_dir):
                click.echo(f"downloaded {saved}", err=True)
        if not verify(record):
            click.echo("jobrunner: the result's signature is INVALID", err=True)
            return 1
        click.echo(f"signature valid (worker {record.worker_metadata.worker_id})", err=True)
        return 0 if record.status == "completed" else 1

    sys.exit(_client_call(server, run))


@main.command()
@click.argument("job_id")
@server_option
def status(job_id: str, server: str) -> None:
    """A job's status record (JSON)."""
    import msgspec

    record = _client_call(server, lambda client: client.status(job_id))
    click.echo(msgspec.json.format(msgspec.json.encode(record), indent=2).decode())


@main.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep showing the log until the job ends.")
@server_option
def logs(job_id: str, follow: bool, server: str) -> None:
    """A job's output so far (or live, with -f)."""
    from jobrunner.client import Client

    async def run(client: Client):
        if not follow:
            click.echo(await client.logs(job_id), nl=False)
            return
        async for text in client.follow(job_id):
            click.echo(text, nl=False)

    _client_call(server, run)


@main.command()
@click.argument("job_id")
@server_option
def outputs(job_id: str, server: str) -> None:
    """A job's output files."""
    for entry in _client_call(server, lambda client: client.outputs(job_id)).outputs:
        if entry.__struct_config__.tag == "file":
            click.echo(f"{entry.size_bytes:>12}  {entry.path}")
        else:
            click.echo(f"{'dir':>12}  {entry.path}")


@main.command()
@click.argument("job_id")
@click.argument("paths", nargs=-1)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where to save them.",
)
@server_option
def download(job_id: str, paths: tuple[str, ...], directory: Path, server: str) -> None:
    """Download output files (all of them when none are named)."""
    from jobrunner.client import Client

    async def run(client: Client):
        if paths:
            return [await client.download(job_id, path, directory) for path in paths]
        return await client.download_all(job_id, directory)

    for saved in _client_call(server, run):
        click.echo(f"downloaded {saved}", err=True)


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
def pool(
    workers_file,
    host,
    port,
    state_dir,
    certfile,
    keyfile,
    trusted_proxies,
    health_interval,
    rate_concurrent,
    rate_per_hour,
    rate_cpu_seconds,
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
            Limits(rate_concurrent, rate_per_hour, rate_cpu_seconds),
            health_interval=health_interval,
        )
        app = build_pool_app(coordinator, TrustedProxies(trusted_proxies))
        serve(app, Listener(host, port, certfile, keyfile), graceful_timeout=5)
    except (ValueError, PermissionError, OSError) as error:
        click.echo(f"jobrunner: {error}", err=True)
        sys.exit(1)
