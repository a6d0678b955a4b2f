"""The HTTP front end: routes that translate requests into service calls and results into JSON.

No rule lives here except what HTTP itself needs: the upload size limit (enforced while the body
streams in), form parsing, and the WebSocket framing of the live log.
"""

import asyncio
import codecs
import contextlib

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Message, Receive
from starlette.websockets import WebSocket, WebSocketDisconnect

from jobrunner import errors
from jobrunner.jobs import Follower
from jobrunner.service import JobService, UploadPart
from servekit import CorsPolicy, JSONResponse, TrustedProxies, client_ip
from servekit import exception_handlers as error_handlers

MAX_MANIFEST = 64 * 1024
_DOWNLOAD_HEADERS = {
    # Outputs are the job's bytes: never let a browser run them in our origin.
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


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


def build_app(
    service: JobService, trusted: TrustedProxies, warning: str | None = None
) -> Starlette:
    s = service.settings
    limit = s.max_upload_mb * 2**20

    async def info(request: Request) -> Response:
        return JSONResponse(service.info(warning))

    async def submit(request: Request) -> Response:
        ip = client_ip(request, trusted)
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise errors.too_large(s.max_upload_mb)
        limited = Request(request.scope, _limited(request.receive, limit, s.max_upload_mb))
        async with limited.form(max_files=1000, max_fields=16, max_part_size=MAX_MANIFEST) as form:
            manifest = form.get("manifest")
            if isinstance(manifest, UploadFile):
                manifest = (await manifest.read(MAX_MANIFEST + 1)).decode("utf-8", "replace")
            if manifest is None:
                raise errors.invalid_manifest("Missing form field: manifest")
            parts = [
                UploadPart(part.filename, part.file)
                for part in form.getlist("files")
                if isinstance(part, UploadFile)
            ]
            result = await service.submit(ip, manifest, parts)
        return JSONResponse(result)

    async def status(request: Request) -> Response:
        return JSONResponse(service.status(request.path_params["job_id"]))

    async def logs(request: Request) -> Response:
        return PlainTextResponse(service.log_text(request.path_params["job_id"]))

    async def outputs(request: Request) -> Response:
        return JSONResponse(service.outputs(request.path_params["job_id"]))

    async def download(request: Request) -> Response:
        found = service.download(request.path_params["job_id"], request.path_params["filepath"])
        return FileResponse(
            found.path, media_type=found.media_type, filename=found.name, headers=_DOWNLOAD_HEADERS
        )

    async def stats(request: Request) -> Response:
        return JSONResponse(service.stats(client_ip(request, trusted)))

    async def environments(request: Request) -> Response:
        return JSONResponse(service.environment_listing())

    async def health(request: Request) -> Response:
        return JSONResponse(service.health(request.query_params.get("challenge")))

    async def stream(websocket: WebSocket) -> None:
        await websocket.accept()
        job = service.jobs.get(websocket.path_params["job_id"])
        if job is None:
            await websocket.close(4404, "Job not found")
            return
        with contextlib.suppress(WebSocketDisconnect):
            await _follow(websocket, job)

    @contextlib.asynccontextmanager
    async def startup_and_shutdown(app: Starlette):
        await service.start()
        yield
        await service.stop()

    return interface(
        info=info,
        submit=submit,
        status=status,
        logs=logs,
        stream=stream,
        outputs=outputs,
        download=download,
        stats=stats,
        environments=environments,
        health=health,
        lifespan=startup_and_shutdown,
    )


def interface(
    *, info, submit, status, logs, stream, outputs, download, stats, environments, health, lifespan
) -> Starlette:
    """The jobrunner HTTP interface with these handlers: a worker's own, or the pool's."""
    app = Starlette(
        routes=[
            Route("/", info),
            Route("/submit", submit, methods=["POST"]),
            Route("/status/{job_id}", status),
            Route("/logs/{job_id}", logs),
            WebSocketRoute("/logs/{job_id}/stream", stream),
            Route("/outputs/{job_id}", outputs),
            Route("/download/{job_id}/{filepath:path}", download),
            Route("/stats", stats),
            Route("/environments", environments),
            Route("/health", health),
        ],
        exception_handlers=error_handlers(),
        middleware=[
            CorsPolicy.anyone(expose_headers=("Retry-After", "Content-Disposition")).middleware()
        ],
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # an API answers 404, never a redirect to guess
    return app


async def _follow(websocket: WebSocket, job) -> None:
    """Send the log so far, then each new chunk; close 1000 with the final status at the end."""
    log = job.log
    follower = Follower()
    log.followers.add(follower)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    offset = 0
    try:
        while True:
            await log.wait_beyond(offset)
            end = len(log.data)
            text = decoder.decode(bytes(log.data[offset:end]), final=log.closed)
            offset = end
            if text and not await _send_unless_lagging(websocket, text, follower):
                await websocket.close(1013, "reader too slow")
                return
            follower.delivered = offset
            if log.closed and offset >= len(log.data):
                await websocket.close(1000, job.state)
                return
    finally:
        log.followers.discard(follower)


async def _send_unless_lagging(websocket: WebSocket, text: str, follower: Follower) -> bool:
    """Send one message; give up (False) if the reader falls too far behind meanwhile."""
    if follower.lagging.is_set():
        return False
    send = asyncio.ensure_future(websocket.send_text(text))
    lag = asyncio.ensure_future(follower.lagging.wait())
    done, _ = await asyncio.wait({send, lag}, return_when=asyncio.FIRST_COMPLETED)
    if send in done:
        lag.cancel()
        send.result()
        return True
    send.cancel()
    return False
