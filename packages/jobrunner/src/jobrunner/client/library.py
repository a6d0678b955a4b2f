"""A Python client for a jobrunner server (or pool): the same verbs as the command line.

    async with Client("http://127.0.0.1:8080") as client:
        job = await client.submit("project/", entrypoint="main.py")
        async for text in client.follow(job.job_id):
            print(text, end="")
        record = await client.wait(job.job_id)  # long polls: GET /status/ID?wait=60
        await client.download_all(job.job_id, "results/")
        client.check(record)  # RecordProblem unless signed, and for the job this client submitted

`cancel(job_id)` stops a queued or running job (its record then says `failed`, `cancelled`).

Errors from the server raise `JobrunnerError` with the interface's fields. Records are decoded
leniently: a `status` or `failure` value this version does not know is kept as its string, and
unknown fields are ignored, so a newer server never breaks this client. Job ids and output paths
are percent-encoded into URLs, never pasted.
"""

import asyncio
import io
import secrets
import ssl
import tarfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import msgspec
from yarl import URL

from jobrunner.signing import RecordProblem, check_record, verify_record
from jobrunner.wire import OutputListing, StatusRecord, SubmitResult

__all__ = ["Client", "JobrunnerError", "RecordProblem", "pack", "server_url", "verify"]
T = TypeVar("T")

DEFAULT_SERVER = "http://127.0.0.1:8080"
LONG_POLL = 60.0  # seconds a `wait` asks the server to hold each status request (its maximum)
_FINISHED = ("completed", "failed")
# A packed upload up to this size is sent as one body built in memory (see `_one_piece`); a
# bigger one streams from aiohttp's FormData rather than being copied once more.
ONE_PIECE_BYTES = 1 << 20


class JobrunnerError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.error = str(body.get("error", "error"))
        self.details = body.get("details")
        self.reason = body.get("reason")
        self.retry_after = body.get("retry_after")
        text = f"{status} {self.error}"
        for extra in (self.details, self.reason):
            if extra:
                text += f": {extra}"
        if self.retry_after:
            text += f" (retry after {self.retry_after} s)"
        super().__init__(text)


def pack(path: str | Path) -> bytes:
    """A gzip tarball of a directory's regular files (or of one file), paths relative to it."""
    source = Path(path)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        files = (
            [source]
            if source.is_file()
            else sorted(
                p
                for p in source.rglob("*")
                if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
            )
        )
        for file in files:
            name = file.name if source.is_file() else file.relative_to(source).as_posix()
            info = archive.gettarinfo(str(file), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(file, "rb") as handle:
                archive.addfile(info, handle)
    return buffer.getvalue()


def verify(
    record: StatusRecord | dict[str, Any],
    worker_id: str | None = None,
    *,
    job_id: str | None = None,
    job_hash: str | None = None,
) -> bool:
    """Whether a status record carries a valid signature (by `worker_id`, if given) and, when
    given, is about `job_id` with `job_hash`. `jobrunner.signing.check_record` says why not."""
    return verify_record(record, worker_id, job_id=job_id, job_hash=job_hash)


def server_url(text: str) -> str:
    """The server's base URL, checked: `host:port` without a scheme means `http://host:port`
    (as curl reads it); anything but an http or https URL with a host is a ValueError that says
    what was given, never aiohttp's traceback at the first request."""
    given = text.strip()
    url_text = given if "://" in given else f"http://{given}"
    try:
        url = URL(url_text)
        url.port  # noqa: B018 -- a port that is not a number raises here, not mid-request
    except ValueError as error:
        raise ValueError(f"the server {given!r} is not a URL ({error})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(
            f"the server {given!r} is not an http:// or https:// URL "
            "(give e.g. http://127.0.0.1:8080)"
        )
    return url_text.rstrip("/")


def _segment(text: str) -> str:
    return quote(text, safe="")


def _output_path(path: str) -> str:
    return "/".join(_segment(part) for part in path.split("/"))


class Client:
    def __init__(
        self,
        server: str = DEFAULT_SERVER,
        *,
        timeout: float = 60.0,
        cacert: str | Path | None = None,
    ) -> None:
        """`cacert`: a PEM file of the CA(s) that a https server's certificate must chain to,
        instead of the system's (a private CA, a self-signed server)."""
        self.server = server_url(server)
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        self._ssl: ssl.SSLContext | bool = True
        if cacert is not None:
            try:
                self._ssl = ssl.create_default_context(cafile=str(cacert))
            except OSError as error:  # missing, unreadable, or not PEM (ssl.SSLError)
                raise ValueError(f"the CA file {cacert} cannot be used: {error}") from None
        self._session: aiohttp.ClientSession | None = None
        # job id -> the job hash its submit answer announced: what its signed result must carry
        self.submitted: dict[str, str | None] = {}

    def _new_session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            timeout=self._timeout, connector=aiohttp.TCPConnector(ssl=self._ssl)
        )

    async def __aenter__(self) -> "Client":
        self._session = self._new_session()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = self._new_session()
        return self._session

    async def _raise_for_error(self, response: aiohttp.ClientResponse) -> None:
        if response.status < 400:
            return
        body = await response.read()
        try:
            data = msgspec.json.decode(body)
        except msgspec.DecodeError:
            data = {"error": body.decode(errors="replace")[:200] or response.reason}
        raise JobrunnerError(response.status, data if isinstance(data, dict) else {})

    async def _decoded(self, response: aiohttp.ClientResponse, kind: type[T]) -> T:
        await self._raise_for_error(response)
        return msgspec.json.decode(await response.read(), type=kind)

    async def submit(
        self,
        path: str | Path | None = None,
        *,
        entrypoint: str,
        tarball: bytes | None = None,
        interpreter: str | None = None,
        environment: str | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        outputs: Sequence[str] | None = None,
        timeout: int | None = None,
        memory_mb: int | None = None,
        stdin: str | None = None,
    ) -> SubmitResult:
        """Submit a job: `path` packed (or `tarball` as it is), with the manifest's fields;
        `stdin` is text the entrypoint reads on its standard input (at most 1 MiB as UTF-8)."""
        form = _form(
            path,
            tarball,
            entrypoint=entrypoint,
            interpreter=interpreter,
            environment=environment,
            args=args,
            env=env,
            outputs=outputs,
            timeout=timeout,
            memory_mb=memory_mb,
            stdin=stdin,
        )
        async with self.session.post(
            f"{self.server}/submit", data=form.data, headers=form.headers
        ) as response:
            result = await self._decoded(response, SubmitResult)
        self.submitted[result.job_id] = result.job_hash
        return result

    async def submit_and_wait(
        self,
        path: str | Path | None = None,
        *,
        entrypoint: str,
        tarball: bytes | None = None,
        interpreter: str | None = None,
        environment: str | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        outputs: Sequence[str] | None = None,
        timeout: int | None = None,
        memory_mb: int | None = None,
        stdin: str | None = None,
    ) -> StatusRecord:
        """`submit`, then the job's final record, in one request while the job takes at most a
        minute (`POST /submit?wait=60`), then by `wait`'s long polls. The job's id is known
        only from the answer: to show it (or cancel) while the job runs, `submit` and `wait`."""
        form = _form(
            path,
            tarball,
            entrypoint=entrypoint,
            interpreter=interpreter,
            environment=environment,
            args=args,
            env=env,
            outputs=outputs,
            timeout=timeout,
            memory_mb=memory_mb,
            stdin=stdin,
        )
        timeout_ = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout.sock_connect, sock_read=LONG_POLL + 30
        )
        params = {"wait": f"{LONG_POLL:g}"}
        async with self.session.post(
            f"{self.server}/submit",
            data=form.data,
            headers=form.headers,
            params=params,
            timeout=timeout_,
        ) as response:
            await self._raise_for_error(response)
            body = await response.read()
        try:
            record = msgspec.json.decode(body, type=StatusRecord)
        except msgspec.ValidationError:
            # A server older than `POST /submit?wait=` answers at once, as to any submit, and so
            # does one that queued the job but could not wait for it (a pool whose worker is gone).
            accepted = msgspec.json.decode(body, type=SubmitResult)
            self.submitted[accepted.job_id] = accepted.job_hash
            return await self.wait(accepted.job_id)
        # The first record stands for the submit's announcement: the records of later long
        # polls (a job of more than a minute) must carry the same job hash.
        self.submitted[record.job_id] = record.job_hash
        return record if record.status in _FINISHED else await self.wait(record.job_id)

    def check(self, record: StatusRecord, worker_id: str | None = None) -> None:
        """Raise RecordProblem unless the record is validly signed (by `worker_id`, if given)
        and, for a job this client submitted, carries the job hash its submit announced."""
        check_record(
            record, worker_id, job_id=record.job_id, job_hash=self.submitted.get(record.job_id)
        )

    async def status(self, job_id: str, wait: float | None = None) -> StatusRecord:
        """The job's record; with `wait` (seconds, at most 60), as soon as the job has finished
        or after `wait` seconds, whichever comes first (one request, no polling)."""
        url = f"{self.server}/status/{_segment(job_id)}"
        if wait is None:
            async with self.session.get(url) as response:
                record = await self._decoded(response, StatusRecord)
        else:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self._timeout.sock_connect, sock_read=wait + 30
            )
            params = {"wait": f"{wait:g}"}
            async with self.session.get(url, params=params, timeout=timeout) as response:
                record = await self._decoded(response, StatusRecord)
        if record.job_id != job_id:  # a cache or proxy mixed answers up: never pass that on
            raise RecordProblem(f"job_id: the server answered about {record.job_id!r}")
        return record

    async def logs(self, job_id: str) -> str:
        async with self.session.get(f"{self.server}/logs/{_segment(job_id)}") as response:
            await self._raise_for_error(response)
            return await response.text(errors="replace")

    async def follow(self, job_id: str) -> AsyncIterator[str]:
        """The log as it is produced; ends when the job does."""
        url = self.server.replace("http", "ws", 1) + f"/logs/{_segment(job_id)}/stream"
        try:
            socket = await self.session.ws_connect(url, heartbeat=30)
        except aiohttp.WSServerHandshakeError as refused:  # 429: too many log streams open
            headers = refused.headers  # aiohttp's, case-insensitive
            retry_after = headers.get("Retry-After", "") if headers is not None else ""
            raise JobrunnerError(
                refused.status,
                {
                    "error": refused.message or "WebSocket refused",
                    "retry_after": int(retry_after) if retry_after.isdigit() else None,
                },
            ) from None
        async with socket:
            async for message in socket:
                if message.type == aiohttp.WSMsgType.TEXT:
                    yield message.data
            if socket.close_code == 4404:
                raise JobrunnerError(404, {"error": "Job not found", "details": job_id})

    async def wait(self, job_id: str) -> StatusRecord:
        """The job's final record, by long polls (`GET /status/ID?wait=60`): one request a
        minute while it runs. A server that answers at once anyway (one older than `wait`, or
        one shutting down) is asked again after a second, never in a tight loop."""
        while True:
            asked = time.monotonic()
            record = await self.status(job_id, wait=LONG_POLL)
            if record.status in _FINISHED:
                return record
            if time.monotonic() - asked < 1:
                await asyncio.sleep(1)

    async def cancel(self, job_id: str) -> StatusRecord:
        """Cancel a queued or running job (`DELETE /jobs/ID`); its final record, `failed` with
        `failure: cancelled`. A job that has already finished raises JobrunnerError (409)."""
        async with self.session.delete(f"{self.server}/jobs/{_segment(job_id)}") as response:
            record = await self._decoded(response, StatusRecord)
        if record.job_id != job_id:
            raise RecordProblem(f"job_id: the server answered about {record.job_id!r}")
        return record

    async def outputs(self, job_id: str) -> OutputListing:
        async with self.session.get(f"{self.server}/outputs/{_segment(job_id)}") as response:
            return await self._decoded(response, OutputListing)

    async def download(self, job_id: str, path: str, directory: str | Path) -> Path:
        target = Path(directory) / path
        parts = path.split("/")
        if any(part in ("", ".", "..") or "\0" in part for part in parts):
            raise ValueError(f"refusing to write outside {directory}: {path!r}")
        url = f"{self.server}/download/{_segment(job_id)}/{_output_path(path)}"
        async with self.session.get(URL(url, encoded=True)) as response:
            await self._raise_for_error(response)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as out:
                async for chunk in response.content.iter_chunked(1 << 16):
                    out.write(chunk)
        return target

    async def download_all(self, job_id: str, directory: str | Path) -> list[Path]:
        listing = await self.outputs(job_id)
        return [
            await self.download(job_id, entry.path, directory)
            for entry in listing.outputs
            if entry.__struct_config__.tag == "file"
        ]

    async def health(self, challenge: str | None = None) -> dict[str, Any]:
        params = {"challenge": challenge} if challenge else {}
        async with self.session.get(f"{self.server}/health", params=params) as response:
            return await self._decoded(response, dict[str, Any])


def _form(
    path: str | Path | None,
    tarball: bytes | None,
    *,
    entrypoint: str,
    interpreter: str | None = None,
    environment: str | None = None,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    outputs: Sequence[str] | None = None,
    timeout: int | None = None,
    memory_mb: int | None = None,
    stdin: str | None = None,
) -> "_Upload":
    """The `POST /submit` form: the manifest (only the fields given) and the packed files."""
    manifest: dict[str, Any] = {"entrypoint": entrypoint}
    for key, value in (
        ("interpreter", interpreter),
        ("environment", environment),
        ("args", list(args) or None),
        ("env", env),
        ("outputs", list(outputs) if outputs else None),
        ("timeout", timeout),
        ("memory_mb", memory_mb),
        ("stdin", stdin or None),
    ):
        if value is not None:
            manifest[key] = value
    text = msgspec.json.encode(manifest).decode()
    packed = tarball if tarball is not None else pack(path or ".")
    if len(packed) > ONE_PIECE_BYTES:
        form = aiohttp.FormData()
        form.add_field("manifest", text)
        form.add_field("files", packed, filename="job.tar.gz", content_type="application/gzip")
        return _Upload(form, {})
    return _one_piece(text, packed)


def _one_piece(manifest: str, packed: bytes) -> "_Upload":
    """The form as one body, which goes out in one write: aiohttp's FormData writes each part's
    headers and bytes apart (nine sends for a hello world), and the server read them as many
    pieces (0.16 to 0.22 ms of a small job's submit-to-completed). The boundary is random and
    checked against what it encloses, as RFC 2046 requires."""
    while True:
        boundary = secrets.token_hex(16)
        if boundary.encode() not in packed and boundary not in manifest:
            break
    head = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="manifest"\r\n\r\n'  # text, UTF-8 (RFC 7578)
        f"{manifest}\r\n"
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="files"; filename="job.tar.gz"\r\n'
        "Content-Type: application/gzip\r\n\r\n"
    )
    body = b"".join((head.encode(), packed, f"\r\n--{boundary}--\r\n".encode()))
    return _Upload(body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})


@dataclass(frozen=True)
class _Upload:
    """A submit's body (`data=`) and the headers that go with it."""

    data: bytes | aiohttp.FormData
    headers: dict[str, str]
