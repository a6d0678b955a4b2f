"""The client commands of `jobrunner`: submit, status, cancel, logs, outputs, download, verify.

Thin front ends over `jobrunner.client`. Every string a server sent (and through it, a job: log
text, output names, failure reasons, error details) goes through `terminal.printable` before it
reaches a terminal. Errors are one line on stderr and exit 1.
"""

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from jobrunner.client.library import Client
    from jobrunner.wire import StatusRecord

T = TypeVar("T")

_server = click.option(
    "--server",
    envvar="JOBRUNNER_SERVER",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The jobrunner server or pool [$JOBRUNNER_SERVER]; host:port means http://host:port.",
)
_cacert = click.option(
    "--cacert",
    envvar="JOBRUNNER_CACERT",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM file of the CA that an https server's certificate must chain to, instead of the "
    "system's [$JOBRUNNER_CACERT].",
)
F = TypeVar("F", bound=Callable[..., Any])


def server_option(function: F) -> F:
    """--server and --cacert: where the server is and whom to trust for it."""
    return _server(_cacert(function))


raw_option = click.option(
    "--raw",
    is_flag=True,
    help="Write the log's control characters as they are, even to a terminal.",
)


def _say(text: str, *, err: bool = False) -> None:
    from jobrunner.client.terminal import printable

    click.echo(printable(text), err=err)


def _fail(text: str) -> None:
    _say(f"jobrunner: {text}", err=True)
    sys.exit(1)


def _client_call(server: str, cacert: str | None, action: "Callable[[Client], Awaitable[T]]") -> T:
    """Run `action(client)` against the server; its errors become one line and exit 1."""
    import asyncio

    import aiohttp
    import msgspec

    from jobrunner.client.library import Client, JobrunnerError, RecordProblem

    try:
        client = Client(server, cacert=cacert)
    except ValueError as error:  # a server that is no http(s) URL, a CA file that is no CA
        _fail(str(error))

    async def run() -> T:
        async with client:
            return await action(client)

    try:
        return asyncio.run(run())
    except JobrunnerError as error:
        _fail(str(error))
    except RecordProblem as error:
        _fail(f"the server's answer does not hold: {error}")
    except msgspec.DecodeError as error:
        _fail(f"the server's answer is not what this client understands: {error}")
    except aiohttp.ClientConnectorCertificateError as error:
        _fail(
            f"cannot reach the server: {error.certificate_error} (a server whose certificate is "
            "from a private CA: --cacert FILE)"
        )
    except OSError as error:  # aiohttp's connection errors are OSErrors
        _fail(f"cannot reach the server: {error}")
    raise AssertionError("unreachable")


def _log_writer(raw: bool) -> Callable[[str], None]:
    """Log text as it comes; on a terminal, its control characters shown, never obeyed."""
    from jobrunner.client.terminal import printable

    safe = not raw and sys.stdout.isatty()

    def write(text: str) -> None:
        # Not click.echo: it drops some escape sequences (CSI) when piped, which would change
        # the job's bytes; piped output is exactly what the job wrote.
        sys.stdout.write(printable(text, keep="\n\t") if safe else text)
        sys.stdout.flush()

    return write


@click.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--entrypoint", "-e", help="File to run [PATH's name, or main.py in a directory].")
@click.option("--interpreter", help="python, bash or node [by extension].")
@click.option("--environment", help="Template name [default].")
@click.option("--arg", "args", multiple=True, help="An argument for the entrypoint (repeatable).")
@click.option("--env", "env", multiple=True, help="NAME=VALUE for the job (repeatable).")
@click.option("--output", "outputs", multiple=True, help="Output glob (repeatable) [**].")
@click.option("--timeout", type=click.IntRange(1), help="Seconds the job may run [300].")
@click.option("--memory-mb", type=click.IntRange(1), help="Memory limit in MiB [512].")
@click.option(
    "--stdin",
    "stdin_file",
    type=click.File("rb"),
    help="A file (- for this command's standard input) whose UTF-8 text the entrypoint reads "
    "on its standard input (at most 1 MiB).",
)
@click.option("--follow", "-f", is_flag=True, help="Show the log live until the job ends.")
@click.option(
    "--download",
    "download_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Download every output into this directory when the job ends.",
)
@raw_option
@server_option
def submit(
    path: Path,
    entrypoint: str | None,
    interpreter: str | None,
    environment: str | None,
    args: tuple[str, ...],
    env: tuple[str, ...],
    outputs: tuple[str, ...],
    timeout: int | None,
    memory_mb: int | None,
    stdin_file: IO[bytes] | None,
    follow: bool,
    download_dir: Path | None,
    raw: bool,
    server: str,
    cacert: str | None,
) -> None:
    """Pack PATH (a directory or a file), run it, and optionally follow and download it.

    With --follow or --download it waits for the end and exits 0 only when the job completed
    and its result is signed, for this very job (its id and the hash of what was sent)."""
    from jobrunner.client.library import Client, RecordProblem

    if entrypoint is None:
        if path.is_file():
            entrypoint = path.name
        elif (path / "main.py").exists():
            entrypoint = "main.py"
        else:
            raise click.UsageError("give --entrypoint (no main.py in the directory)")
    variables = {}
    for item in env:
        name, equals, value = item.partition("=")
        if not equals:
            raise click.UsageError(f"--env takes NAME=VALUE, not {item!r}")
        variables[name] = value
    stdin = None
    if stdin_file is not None:
        try:
            stdin = stdin_file.read().decode()
        except UnicodeDecodeError as error:
            raise click.UsageError(
                f"--stdin takes UTF-8 text ({error.reason} at byte {error.start}); "
                "send binary data as a file of the upload"
            ) from None
    write = _log_writer(raw)

    async def run(client: Client) -> int:
        job = await client.submit(
            path,
            entrypoint=entrypoint,
            interpreter=interpreter,
            environment=environment,
            args=args,
            env=variables or None,
            outputs=outputs or None,
            timeout=timeout,
            memory_mb=memory_mb,
            stdin=stdin,
        )
        _say(f"job {job.job_id} queued (position {job.position})", err=True)
        if not (follow or download_dir):
            _say(job.job_id)
            return 0
        if follow:
            async for text in client.follow(job.job_id):
                write(text)
        record = await client.wait(job.job_id)  # long polls, not a stream or a polling loop
        failure = f" ({record.failure})" if record.failure else ""
        _say(
            f"job {record.job_id} {record.status}{failure}, exit code "
            f"{record.execution_metadata.exit_code}, "
            f"{record.execution_metadata.cpu_seconds} CPU-s",
            err=True,
        )
        _say_what_matched_nothing(outputs, record)
        if download_dir is not None:
            for saved in await client.download_all(job.job_id, download_dir):
                _say(f"downloaded {saved}", err=True)
        try:
            client.check(record)
        except RecordProblem as problem:
            _say(f"jobrunner: the result does not verify: {problem}", err=True)
            return 1
        _say(f"signature valid (worker {record.worker_metadata.worker_id})", err=True)
        return 0 if record.status == "completed" else 1

    sys.exit(_client_call(server, cacert, run))


def _show_record(record: Any) -> None:
    import msgspec

    from jobrunner.client.terminal import json_for_terminal

    text = msgspec.json.format(msgspec.json.encode(record), indent=2).decode()
    click.echo(json_for_terminal(text))


@click.command()
@click.argument("job_id")
@click.option(
    "--wait",
    type=click.FloatRange(0, 60, min_open=True),
    help="Answer as soon as the job has finished, or after this many seconds (at most 60).",
)
@server_option
def status(job_id: str, wait: float | None, server: str, cacert: str | None) -> None:
    """A job's status record (JSON). An id that starts with '-' goes after '--'."""
    _show_record(_client_call(server, cacert, lambda client: client.status(job_id, wait=wait)))


@click.command()
@click.argument("job_id")
@server_option
def cancel(job_id: str, server: str, cacert: str | None) -> None:
    """Cancel a queued or running job and show its final record (failed, cancelled). A job
    that has already finished is an error (exit 1), and its record is left as it was."""
    record = _client_call(server, cacert, lambda client: client.cancel(job_id))
    _show_record(record)
    if record.failure != "cancelled":  # still running after the server's patience: say so
        _fail(f"job {record.job_id} is {record.status}, not cancelled yet")


@click.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep showing the log until the job ends.")
@raw_option
@server_option
def logs(job_id: str, follow: bool, raw: bool, server: str, cacert: str | None) -> None:
    """A job's output so far (or live, with -f). On a terminal, control characters are shown
    as escapes (\\x1b), never obeyed; --raw writes them as they are."""
    write = _log_writer(raw)

    async def run(client: "Client") -> None:
        if not follow:
            write(await client.logs(job_id))
            return
        async for text in client.follow(job_id):
            write(text)

    _client_call(server, cacert, run)


@click.command()
@click.argument("job_id")
@server_option
def outputs(job_id: str, server: str, cacert: str | None) -> None:
    """A job's output files; when it has none, why (on stderr)."""
    from jobrunner.wire import FileEntry, OutputListing, StatusRecord

    async def run(client: "Client") -> tuple[OutputListing, StatusRecord | None]:
        listing = await client.outputs(job_id)
        return listing, None if listing.outputs else await client.status(job_id)

    listing, record = _client_call(server, cacert, run)
    for entry in listing.outputs:
        size = f"{entry.size_bytes:>12}" if isinstance(entry, FileEntry) else f"{'dir':>12}"
        _say(f"{size}  {entry.path}")
    if record is not None:
        _say(f"jobrunner: {_why_no_outputs(record)}", err=True)


def _why_no_outputs(record: "StatusRecord") -> str:
    """What the server's record tells about an empty listing (the manifest's patterns are not in
    it; `submit --output` names the ones that matched nothing)."""
    if record.status in ("queued", "running"):
        return f"no outputs yet: the job is {record.status}; they are copied out when it ends"
    if _did_not_run(record):
        return f"no outputs: the job did not run ({record.failure}; its log says why)"
    return (
        f"no outputs: when the job ended ({record.status}), no file in its work dir matched its "
        "outputs patterns (`**`, every file, unless the manifest gave `outputs`); its log "
        "names files that matched but were not copied out"
    )


def _say_what_matched_nothing(patterns: tuple[str, ...], record: "StatusRecord") -> None:
    """After a job ends: each --output pattern no output matches, or why there are none."""
    if record.output_files and not patterns:
        return
    if not record.output_files and (not patterns or _did_not_run(record)):
        _say(f"jobrunner: {_why_no_outputs(record)}", err=True)
        return
    for pattern in _unmatched(patterns, record):
        _say(
            f"jobrunner: --output {pattern!r} matched no file of the job's work dir (paths are "
            "relative to it; `*` and `?` stay within one directory, `**` crosses them, `dir/` "
            "is everything below dir)",
            err=True,
        )


def _did_not_run(record: "StatusRecord") -> bool:
    return record.failure in ("sandbox_error", "environment_error")


def _unmatched(patterns: tuple[str, ...], record: "StatusRecord") -> list[str]:
    """The --output patterns that no output of the finished job matches."""
    from jobrunner.sandbox.workdir import Patterns

    return [
        pattern
        for pattern in patterns
        if not any(Patterns([pattern]).matches(path) for path in record.output_files)
    ]


@click.command()
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
def download(
    job_id: str, paths: tuple[str, ...], directory: Path, server: str, cacert: str | None
) -> None:
    """Download output files (all of them when none are named)."""

    async def run(client: "Client") -> list[Path]:
        if paths:
            return [await client.download(job_id, path, directory) for path in paths]
        return await client.download_all(job_id, directory)

    try:
        saved_files = _client_call(server, cacert, run)
    except ValueError as error:  # a path that would leave the directory
        _fail(str(error))
    for saved in saved_files:
        _say(f"downloaded {saved}", err=True)


def _strict_json(data: bytes) -> Any:
    """JSON as a verifier must read it: one value per key (with a key twice, which one did the
    signer mean?), no NaN or Infinity, and a nesting too deep is an error, not a crash."""
    import json

    def once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found:
                raise ValueError(f"the key {key!r:.60} appears twice in one object")
            found[key] = value
        return found

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(data, object_pairs_hook=once, parse_constant=refuse)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 ({error.reason} at byte {error.start})") from None


@click.command()
@click.argument("record", type=click.File("rb"), default="-")
@click.option("--worker-id", help="Only accept a signature by this worker key (base64).")
@click.option("--job-id", help="Only accept a record about this job.")
@click.option("--job-hash", help="Only accept a record with this job hash (what was submitted).")
def verify(
    record: IO[bytes], worker_id: str | None, job_id: str | None, job_hash: str | None
) -> None:
    """Check the signature of a status record (a file or - for standard input); say what
    failed (which field, which output) when it does not verify."""
    from jobrunner.signing import RecordProblem, check_record

    try:
        data: Any = _strict_json(record.read())
    except ValueError as error:
        _say(f"jobrunner: not a JSON status record: {error}", err=True)
        sys.exit(2)
    try:
        check_record(data, worker_id, job_id=job_id, job_hash=job_hash)
    except RecordProblem as problem:
        _say(f"signature INVALID: {problem}", err=True)
        sys.exit(1)
    _say(
        f"signature valid: job {data['job_id']} {data['status']} by worker "
        f"{data['worker_metadata']['worker_id']}"
    )


COMMANDS = (submit, status, cancel, logs, outputs, download, verify)
