"""The pool's HTTP front end: the same interface as a worker, answered through the workers."""

import contextlib

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from jobrunner import __version__, errors
from jobrunner.app import interface
from jobrunner.pool import Pool
from jobrunner.wire import ServerInfo
from servekit import HTTPError, JSONResponse, TrustedProxies, client_ip

PASSED_HEADERS = (
    "content-type",
    "content-disposition",
    "x-content-type-options",
    "content-security-policy",
    "content-length",
    "retry-after",
)


def build_pool_app(pool: Pool, trusted: TrustedProxies, max_upload_mb: int = 50) -> Starlette:
    limit = max_upload_mb * 2**20

    async def info(request: Request) -> Response:
        healthy = sum(1 for w in pool.workers if w.healthy)
        limits = pool.limits
        return JSONResponse(
            ServerInfo(
                service="jobrunner-pool",
                status="running",
                description=f"A trusted pool of {len(pool.workers)} jobrunner workers "
                f"({healthy} healthy); the same interface as one worker.",
                privacy="No accounts. Jobs and files live on the workers and are deleted there "
                "after download or retention; the pool keeps only job routes in memory.",
                limits=f"per IP: {limits.cpu_seconds:g} CPU-seconds per {limits.cpu_window:g} s, "
                f"{limits.concurrent} concurrent jobs, {limits.per_hour} jobs per hour; "
                "per job: as the workers say",
                version=__version__,
            )
        )

    async def submit(request: Request) -> Response:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise errors.too_large(max_upload_mb)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise errors.too_large(max_upload_mb)
        status, answer = await pool.submit(
            client_ip(request, trusted), bytes(body), request.headers.get("content-type", "")
        )
        return Response(answer, status, media_type="application/json")

    async def status(request: Request) -> Response:
        return JSONResponse(await pool.status(request.path_params["job_id"]))

    async def proxied(request: Request) -> Response:
        worker = pool.route(request.path_params["job_id"])
        try:
            reply = await pool.session.get(f"{worker.url}{request.url.path}")  # type: ignore[union-attr]
        except (aiohttp.ClientError, TimeoutError):
            raise HTTPError(502, "Worker unreachable", worker.url) from None
        headers = {k: v for k, v in reply.headers.items() if k.lower() in PASSED_HEADERS}

        async def body():
            try:
                async for chunk in reply.content.iter_chunked(1 << 16):
                    yield chunk
            finally:
                reply.release()

        return StreamingResponse(body(), reply.status, headers=headers)

    async def stats(request: Request) -> Response:
        return JSONResponse(pool.stats(client_ip(request, trusted)))

    async def environments(request: Request) -> Response:
        worker = pool.any_worker()
        async with pool.session.get(f"{worker.url}/environments") as reply:  # type: ignore[union-attr]
            return Response(await reply.read(), reply.status, media_type="application/json")

    async def health(request: Request) -> Response:
        status = "healthy" if any(w.healthy for w in pool.workers) else "degraded"
        return JSONResponse(pool.key.health(status, request.query_params.get("challenge")))

    async def stream(websocket: WebSocket) -> None:
        await websocket.accept()
        job = pool.jobs.get(websocket.path_params["job_id"])
        if job is None or job.lost is not None:
            await websocket.close(4404, "Job not found")
            return
        url = job.worker.url.replace("http", "ws", 1) + websocket.url.path
        with contextlib.suppress(WebSocketDisconnect):
            try:
                async with pool.session.ws_connect(url) as upstream:  # type: ignore[union-attr]
                    while True:
                        message = await upstream.receive()
                        if message.type == aiohttp.WSMsgType.TEXT:
                            await websocket.send_text(message.data)
                            continue
                        # The worker's close code and reason (1000 + final status, 1013, ...).
                        if message.type == aiohttp.WSMsgType.CLOSE:
                            await websocket.close(message.data or 1000, message.extra or "")
                        else:
                            await websocket.close(1011, "worker lost")
                        return
            except (aiohttp.ClientError, TimeoutError):
                await websocket.close(1011, "worker lost")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        await pool.start()
        yield
        await pool.stop()

    return interface(
        info=info,
        submit=submit,
        status=status,
        logs=proxied,
        stream=stream,
        outputs=proxied,
        download=proxied,
        stats=stats,
        environments=environments,
        health=health,
        lifespan=lifespan,
    )
