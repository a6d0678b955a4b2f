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
