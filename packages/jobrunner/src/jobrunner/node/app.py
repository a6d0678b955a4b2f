"""The HTTP front end: routes that translate requests into service calls and results into JSON.

No rule lives here except what HTTP itself needs: the upload size limit (enforced while the body
streams in), form parsing, and the WebSocket framing of the live log.
"""

import asyncio
import codecs
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from jobrunner import errors, uploads
from jobrunner.jobs import Follower, Job, Log
from jobrunner.logformat import client_key
from jobrunner.metrics import Metrics
from jobrunner.node import openapi
from jobrunner.node.edge import (
    OnRefusal,
    drop_small_body,
    exception_handlers,
    refusal_recorder,
    refuse_websocket,
)
from jobrunner.node.service import JobService
from jobrunner.ratelimit import StreamSlot
from servekit import (
    ClientFile,
    ClientStream,
    CorsPolicy,
    JSONResponse,
    TrustedProxies,
    client_ip,
    descriptors,
    rate_key,
    until_gone,
    while_connected,
)

# The manifest form field, in bytes: room for a stdin of 1 MiB (`wire.STDIN_MAX`) written as
# UTF-8, escaped up to twice its size, with the other fields. Every non-file part of a form may
# be this large and is parsed in memory (16 at most): 32 MiB, as much as the 32 file parts' spools.
MAX_MANIFEST = 2 * 2**20
LOG_CHUNK = 64 * 1024  # bytes of log per message or response chunk: memory per reader is bounded
_DOWNLOAD_HEADERS = {
    # Outputs are the job's bytes: never let a browser run them in our origin.
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}
log = logging.getLogger("jobrunner")
Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")
# `GET /status/{id}?wait=S`: at most a minute, so that proxies' idle timeouts (often 60 s or more)
# and the clients' read timeouts never cut a long poll; a decimal number of seconds.
MAX_WAIT = 60.0
_SECONDS = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3})?")


def wait_seconds(request: Request) -> float | None:
    """The `wait` query parameter (seconds, more than 0 and at most MAX_WAIT), or None."""
    text = request.query_params.get("wait")
    if text is None:
        return None
    if not _SECONDS.fullmatch(text) or not 0 < float(text) <= MAX_WAIT:
        raise errors.InvalidParameter(
            f"wait: a number of seconds more than 0 and at most {MAX_WAIT:g}, not {text[:40]!r}"
        )
    return float(text)


async def unless_gone(request: Request, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None once the client has gone (`work` is then cancelled): a long poll
    whose client left holds nothing until its time is up."""
    return await until_gone(request.receive, "http.disconnect", work)


def _limited(receive: Receive, limit: int, limit_mb: int) -> Receive:
    seen = 0

    async def receive_within_limit() -> Message:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise errors.too_large(limit_mb)
        return message

    return receive_within_limit


@contextlib.asynccontextmanager
async def _read_form(request: Request, deadline: float, timeout: float) -> AsyncIterator[FormData]:
    """The submit form, read by `deadline` (`timeout` after the request came). Parsing stops at
    the first file part beyond `uploads.MAX_FILE_PARTS` + 1 (the manifest may be a file part:
    curl's `-F manifest=@file`); `uploads.unpack` refuses a `files` list over the cap itself."""
    try:
        async with asyncio.timeout(deadline - time.monotonic()):
            form = await request.form(
                max_files=uploads.MAX_FILE_PARTS + 1, max_fields=16, max_part_size=MAX_MANIFEST
            )
    except TimeoutError:
        raise errors.UploadTimeout(f"the upload did not arrive within {timeout:g} s") from None
    except HTTPException as error:  # Starlette's words for it: "Too many files. Maximum ..."
        if error.status_code == 400 and error.detail.startswith("Too many files"):
            raise errors.invalid_files(uploads.too_many_parts()) from None
        if error.status_code == 400 and error.detail.startswith("Part exceeded maximum size"):
            raise errors.invalid_manifest(_manifest_too_large()) from None
        raise
    try:
        yield form
    finally:
        await form.close()


def _manifest_too_large() -> str:
    return f"the manifest is larger than {MAX_MANIFEST} bytes (stdin: at most 1 MiB as UTF-8)"


async def _log_chunks(log_: Log) -> AsyncIterator[bytes]:
    """The log as it is now, decoded (invalid UTF-8 replaced) one bounded chunk at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    end = len(log_.data)
    for offset in range(0, end, LOG_CHUNK):
        stop = min(end, offset + LOG_CHUNK)
        yield decoder.decode(bytes(log_.data[offset:stop]), final=stop == end).encode()


@contextlib.asynccontextmanager
async def submission(
    request: Request, limit: int, limit_mb: int, deadline: float, timeout: float
) -> AsyncIterator[tuple[str, list[uploads.UploadPart]]]:
    """The manifest text and the file parts of a submit form, read within `limit` bytes by
    `deadline` (the worker's and a cluster node's submit alike)."""
    limited = Request(request.scope, _limited(request.receive, limit, limit_mb))
    async with _read_form(limited, deadline, timeout) as form:
        manifest = form.get("manifest")
        if isinstance(manifest, UploadFile):
            data = await manifest.read(MAX_MANIFEST + 1)
            if len(data) > MAX_MANIFEST:
                raise errors.invalid_manifest(_manifest_too_large())
            manifest = data.decode("utf-8", "replace")
        if manifest is None:
            raise errors.invalid_manifest("Missing form field: manifest")
        parts = [
            uploads.UploadPart(part.filename, part.file)
            for part in form.getlist("files")
            if isinstance(part, UploadFile)
        ]
        yield manifest, parts


def build_app(
    service: JobService, trusted: TrustedProxies, warning: str | None = None
) -> Starlette:
    s = service.settings
    limit = s.max_upload_mb * 2**20
    metrics = service.metrics

    def client(connection: HTTPConnection) -> str:
        """Who is asking, as the limits and the queue count clients: the address (behind trusted
        proxies), an IPv6 one by its network. Derived here: the service parses no addresses."""
        return rate_key(client_ip(connection, trusted), s.rate_ipv6_prefix)

    def pseudonym(connection: HTTPConnection) -> str:
        return client_key(client(connection))

    def open_stream(connection: HTTPConnection) -> StreamSlot:
        """A slot for one stream of the client: 503 while the process is short of open files
        (long-lived work waits so that short requests are still answered), else the service's."""
        if descriptors.running_low():
            raise errors.short_of_files()
        return service.open_stream(client(connection))

    on_refusal = refusal_recorder(metrics, pseudonym)

    async def info(request: Request) -> Response:
        return JSONResponse(service.info(warning))

    async def submit(request: Request) -> Response:
        who = client(request)
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise errors.too_large(s.max_upload_mb)
        # Limits first, from the headers alone: a client over them is refused before it uploads.
        # With `?wait=S` the answer is a long poll as well, so its stream is taken here too: a
        # refusal after the job was queued would leave the client without its job's id.
        stream = None
        try:
            seconds = wait_seconds(request)
            if descriptors.running_low():
                raise errors.short_of_files()
            reservation = service.admit(who)
            if seconds is not None:
                try:
                    stream = open_stream(request)
                except errors.JobrunnerError:
                    service.cancel(reservation)
                    raise
        except errors.JobrunnerError:
            await drop_small_body(request)  # so that the client reads the 429, not a reset
            raise
        try:
            # One deadline for reading the body and unpacking it: the service checks it as it
            # unpacks.
            deadline = time.monotonic() + s.upload_timeout
            handed_over = False  # from then on, the service gives the slot back if the job fails
            try:
                async with submission(
                    request, limit, s.max_upload_mb, deadline, s.upload_timeout
                ) as (manifest, parts):
                    handed_over = True
                    result = await service.submit(who, manifest, parts, reservation, deadline)
            except BaseException:
                if not handed_over:
                    service.cancel(reservation)
                raise
            if seconds is None:
                return JSONResponse(result)
            # Submit and wait in one request (as Judge0's `wait=true`): the job's record once it
            # has finished, or as it is after `seconds`; the client saves a round trip. The job
            # is queued now: whatever happens to the wait, the answer names it.
            try:
                record = await unless_gone(request, service.wait(result.job_id, seconds))
                return JSONResponse(service.status(result.job_id) if record is None else record)
            except errors.JobrunnerError:
                return JSONResponse(result)
        finally:
            if stream is not None:
                stream.close()

    async def status(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        seconds = wait_seconds(request)
        if seconds is None:
            return JSONResponse(service.status(job_id))
        service.find(job_id)  # 404 before a slot is taken
        # A long poll holds a connection for up to a minute: it counts as one of the client's
        # streams, like a log or a download.
        slot = open_stream(request)
        try:
            record = await unless_gone(request, service.wait(job_id, seconds))
        finally:
            slot.close()
        return JSONResponse(service.status(job_id) if record is None else record)

    async def cancel(request: Request) -> Response:
        return JSONResponse(await service.cancel_job(request.path_params["job_id"]))

    async def logs(request: Request) -> Response:
        job = service.find(request.path_params["job_id"])
        slot = open_stream(request)
        return ClientStream(
            _log_chunks(job.log),
            media_type="text/plain; charset=utf-8",
            on_close=metrics.counted("log", slot.close),
        )

    async def outputs(request: Request) -> Response:
        return JSONResponse(service.outputs(request.path_params["job_id"]))

    async def download(request: Request) -> Response:
        # The slot first: a refused download must not count as downloaded (deletion starts).
        slot = open_stream(request)
        try:
            found = service.download(request.path_params["job_id"], request.path_params["filepath"])
        except BaseException:
            slot.close()
            raise
        return ClientFile(
            found.path,
            media_type=found.media_type,
            filename=found.name,
            headers=_DOWNLOAD_HEADERS,
            on_close=metrics.counted("download", slot.close),
        )

    async def stats(request: Request) -> Response:
        return JSONResponse(service.stats(client(request)))

    async def environments(request: Request) -> Response:
        return JSONResponse(service.environment_listing())

    async def health(request: Request) -> Response:
        answer = service.health(request.query_params.get("challenge"))
        # 503 while draining: a load balancer's (or Kubernetes') check takes it out of rotation;
        # a pool reads the signed body and keeps collecting the results of its jobs.
        return JSONResponse(answer, status_code=503 if answer.status == "draining" else 200)

    async def stream(websocket: WebSocket) -> None:
        job = service.jobs.get(websocket.path_params["job_id"])
        if job is None:
            await websocket.accept()
            await websocket.close(4404, "Job not found")
            return
        try:
            slot = open_stream(websocket)
        except (errors.RateLimited, errors.Busy) as error:  # 429, or 503 short of open files
            await refuse_websocket(websocket, error, on_refusal)
            return
        close = metrics.counted("websocket", slot.close)
        try:
            await websocket.accept()
            with contextlib.suppress(WebSocketDisconnect):
                await while_connected(websocket, _follow(websocket, job, s.follower_stall))
        finally:
            close()

    @contextlib.asynccontextmanager
    async def startup_and_shutdown(app: Starlette) -> AsyncIterator[None]:
        await service.start()
        yield
        await service.stop()

    return interface(
        info=info,
        submit=submit,
        status=status,
        cancel=cancel,
        logs=logs,
        stream=stream,
        outputs=outputs,
        download=download,
        stats=stats,
        environments=environments,
        health=health,
        lifespan=startup_and_shutdown,
        metrics=metrics,
        on_refusal=on_refusal,
    )


class _AnyPath(Convertor[str]):
    """A path that may hold any character: Starlette's `path` convertor (`.*`) stops at a
    newline, and an output may be named `a\nb` (listed, signed, and then a 404)."""

    regex = "[\\s\\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anypath", _AnyPath())


async def _upgrade_required(request: Request) -> Response:
    raise errors.UpgradeRequired("this is a WebSocket endpoint: connect with Upgrade: websocket")


async def _openapi(request: Request) -> Response:
    return Response(openapi.document(), media_type="application/json")


def interface(
    *,
    info: Handler,
    submit: Handler,
    status: Handler,
    cancel: Handler,
    logs: Handler,
    stream: Callable[[WebSocket], Awaitable[None]],
    outputs: Handler,
    download: Handler,
    stats: Handler,
    environments: Handler,
    health: Handler,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]],
    metrics: Metrics,
    on_refusal: OnRefusal,
) -> Starlette:
    """The jobrunner HTTP interface with these handlers: a worker's own, or the pool's. Each
    refusal is told to `on_refusal`; the bytes of uploads and downloads go to `metrics`."""
    app = Starlette(
        routes=[
            Route("/", info),
            Route("/submit", submit, methods=["POST"]),
            Route("/status/{job_id}", status),
            Route("/jobs/{job_id}", cancel, methods=["DELETE"]),
            Route("/logs/{job_id}", logs),
            WebSocketRoute("/logs/{job_id}/stream", stream),
            Route("/logs/{job_id}/stream", _upgrade_required),  # plain HTTP: 426
            Route("/outputs/{job_id}", outputs),
            Route("/download/{job_id}/{filepath:anypath}", download),
            Route("/stats", stats),
            Route("/environments", environments),
            Route("/health", health),
            Route("/openapi.json", _openapi),  # the same for a worker and a pool
        ],
        exception_handlers=exception_handlers(on_refusal),
        middleware=[
            Middleware(Traffic, metrics=metrics),
            CorsPolicy.anyone(expose_headers=("Retry-After", "Content-Disposition")).middleware(),
        ],
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # an API answers 404, never a redirect to guess
    return app


class Traffic:
    """Counts the bytes of POST /submit bodies as they are received (accepted or not) and of
    successful GET /download bodies as they are sent, at the ASGI level where both pass whole."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["method"] == "POST" and scope["path"] == "/submit":
            uploaded = self.metrics.uploaded

            async def counted_receive() -> Message:
                message = await receive()
                uploaded.inc(len(message.get("body", b"")))
                return message

            await self.app(scope, counted_receive, send)
        elif scope["path"].startswith("/download/"):
            downloaded = self.metrics.downloaded
            succeeded = False  # an error's JSON body is not a download

            async def counted_send(message: Message) -> None:
                nonlocal succeeded
                await send(message)
                if message["type"] == "http.response.start":
                    succeeded = message["status"] in (200, 206)
                elif message["type"] == "http.response.body" and succeeded:
                    downloaded.inc(len(message.get("body", b"")))

            await self.app(scope, receive, counted_send)
        else:
            await self.app(scope, receive, send)


async def _follow(websocket: WebSocket, job: Job, stall: float) -> None:
    """Send the log so far in bounded chunks, then each new chunk; close 1000 with the final
    status at the end. Each send waits for the connection to take it (backpressure), so a reader
    costs at most one chunk plus the transport's buffer; one that stops reading for `stall`
    seconds, or falls more than 1 MiB behind a live log, is closed with 1013."""
    log_ = job.log
    follower = Follower(joined=len(log_.data))
    log_.followers.add(follower)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    offset = 0
    try:
        while True:
            await log_.wait_beyond(offset)
            end = min(len(log_.data), offset + LOG_CHUNK)
            final = log_.closed and end >= len(log_.data)
            text = decoder.decode(bytes(log_.data[offset:end]), final=final)
            offset = end
            if text and not await _send_unless_lagging(websocket, text, follower, stall):
                log.info("job %s: a log follower was closed 1013 (reader too slow)", job.id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(websocket.close(1013, "reader too slow"), 5)
                return
            follower.delivered = offset
            if log_.closed and offset >= len(log_.data):
                await websocket.close(1000, job.state)
                return
    finally:
        log_.followers.discard(follower)


async def _send_unless_lagging(
    websocket: WebSocket, text: str, follower: Follower, stall: float
) -> bool:
    """Send one message; give up (False) if the reader falls too far behind meanwhile, or does
    not take it within `stall` seconds."""
    if follower.lagging.is_set():
        return False
    send = asyncio.ensure_future(websocket.send_text(text))
    lag = asyncio.ensure_future(follower.lagging.wait())
    done, _ = await asyncio.wait({send, lag}, timeout=stall, return_when=asyncio.FIRST_COMPLETED)
    lag.cancel()
    if send in done:
        send.result()
        return True
    send.cancel()
    return False
