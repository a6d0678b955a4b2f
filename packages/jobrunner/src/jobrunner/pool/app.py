"""The pool's HTTP front end: the same interface as a worker, answered through the workers
(reads are passed on by `jobrunner.proxying`, shared with the cluster mode)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote

import aiohttp
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from jobrunner import __version__, errors, proxying
from jobrunner.logformat import client_key
from jobrunner.node.app import interface, unless_gone, wait_seconds
from jobrunner.node.edge import drop_small_body, refusal_recorder, refuse_websocket
from jobrunner.pool.coordinator import Pool
from jobrunner.pool.spool import Spool
from jobrunner.wire import ServerInfo
from servekit import JSONResponse, TrustedProxies, client_ip


def build_pool_app(pool: Pool, trusted: TrustedProxies, max_upload_mb: int = 50) -> Starlette:
    limit = max_upload_mb * 2**20
    metrics = pool.metrics

    def pseudonym(connection: HTTPConnection) -> str:
        return client_key(pool.client(client_ip(connection, trusted)))

    on_refusal = refusal_recorder(metrics, pseudonym)

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
                "after download or retention; the pool keeps job routes and finished status "
                f"records in memory for {pool.retention:g} s.",
                limits=f"per IP (IPv6: per /{limits.ipv6_prefix}): {limits.cpu_seconds:g} "
                f"CPU-seconds per {limits.cpu_window:g} s, {limits.concurrent} concurrent jobs, "
                f"{limits.per_hour} jobs per hour, "
                f"{limits.streams} streams (logs, downloads) at once; per job: as the workers say",
                version=__version__,
            )
        )

    async def submit(request: Request) -> Response:
        ip = client_ip(request, trusted)
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise errors.too_large(max_upload_mb)
        close_stream = None  # `?wait=S`: the long poll's streams, taken before the upload
        try:
            seconds = wait_seconds(request)
            reservation = await pool.admit(ip)  # 429/503 from the headers alone
            if seconds is not None:
                try:
                    close_stream = pool.open_proxied(ip)
                except errors.JobrunnerError:
                    pool.cancel(reservation)
                    raise
        except errors.JobrunnerError:
            await drop_small_body(request)  # so that the client reads the 429, not a reset
            raise
        try:
            handed_over = False  # from then on, `pool.submit` settles the reservation
            try:
                with Spool() as body:
                    await _receive(request, body, limit, max_upload_mb, pool.upload_timeout)
                    handed_over = True
                    content_type = request.headers.get("content-type", "")
                    status, answer, job_id = await pool.submit(ip, body, content_type, reservation)
            finally:
                if not handed_over:
                    pool.cancel(reservation)
            if seconds is None or job_id is None:
                return Response(answer, status, media_type="application/json")
            # Submit and wait in one request, as at a worker: the record once the job has
            # finished, or as it is after `seconds`. The job is queued now: if its worker cannot
            # be asked (gone, or its own limits refuse the long poll), the answer is the
            # worker's acceptance, which names the job, never an error without its id.
            try:
                record = await unless_gone(request, pool.status(job_id, seconds, ip))
            except errors.JobrunnerError:
                return Response(answer, status, media_type="application/json")
            if record is None:  # the client has gone: nobody reads this
                return Response(status_code=204)
            return JSONResponse(record)
        finally:
            if close_stream is not None:
                close_stream()

    async def status(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        seconds = wait_seconds(request)
        if seconds is None:
            return JSONResponse(await pool.status(job_id))
        pool.find(job_id)  # 404 before a slot is taken
        # A long poll counts as one of the client's streams and one of the pool's, as at a worker.
        ip = client_ip(request, trusted)
        close = pool.open_proxied(ip)
        try:
            record = await unless_gone(request, pool.status(job_id, seconds, ip))
        finally:
            close()
        if record is None:  # the client has gone: nobody reads this
            return Response(status_code=204)
        return JSONResponse(record)

    async def cancel(request: Request) -> Response:
        return JSONResponse(await pool.cancel_job(request.path_params["job_id"]))

    async def proxy(
        request: Request,
        upstream: str,
        session: aiohttp.ClientSession,
        on_close: Callable[[], None] | None = None,
    ) -> Response:
        return await proxying.proxy(upstream, session, client_ip(request, trusted), on_close)

    async def logs(request: Request) -> Response:
        worker, job = pool.route(request.path_params["job_id"])
        close = metrics.counted("log", pool.open_proxied(client_ip(request, trusted)))
        upstream = f"{worker.url}/logs/{job}"
        return await proxy(request, upstream, pool.session("streams"), close)

    async def outputs(request: Request) -> Response:
        worker, job = pool.route(request.path_params["job_id"])
        return await proxy(request, f"{worker.url}/outputs/{job}", pool.session("api"))

    async def download(request: Request) -> Response:
        worker, job = pool.route(request.path_params["job_id"])
        path = proxying.output_path(request.path_params["filepath"])
        upstream = f"{worker.url}/download/{job}/{path}"
        close = metrics.counted("download", pool.open_proxied(client_ip(request, trusted)))
        return await proxy(request, upstream, pool.session("streams"), close)

    async def stats(request: Request) -> Response:
        return JSONResponse(pool.stats(client_ip(request, trusted)))

    async def environments(request: Request) -> Response:
        status, body = await pool.environments()
        return Response(body, status, media_type="application/json")

    async def health(request: Request) -> Response:
        status = "healthy" if any(w.available for w in pool.workers) else "degraded"
        return JSONResponse(pool.key.health(status, request.query_params.get("challenge")))

    async def stream(websocket: WebSocket) -> None:
        job = pool.jobs.get(websocket.path_params["job_id"])
        if job is None or job.lost:
            await websocket.accept()
            await websocket.close(4404, "Job not found")
            return
        client = client_ip(websocket, trusted)
        try:
            slot = pool.open_stream(client)
        except (errors.RateLimited, errors.Busy) as error:  # 429, or 503 short of open files
            await refuse_websocket(websocket, error, on_refusal)
            return
        try:
            await websocket.accept()
            if pool.open_streams >= pool.max_streams:
                await websocket.close(1013, "too many live logs at once; try again later")
                return
            pool.open_streams += 1
            uncount = metrics.stream_opened("websocket")
            try:
                with contextlib.suppress(WebSocketDisconnect):
                    job_path = quote(job.job_id, safe="")
                    await proxying.relay(
                        websocket, pool.session("streams"), job.worker.url, job_path, client
                    )
            finally:
                pool.open_streams -= 1
                uncount()
        finally:
            slot.close()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.start()
        yield
        await pool.stop()

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
        lifespan=lifespan,
        metrics=metrics,
        on_refusal=on_refusal,
    )


async def _receive(
    request: Request, body: Spool, limit: int, limit_mb: int, timeout: float
) -> None:
    """Read the request body into `body`: `413` as soon as it passes `limit`, `408` if it has not
    all arrived within `timeout` seconds (a slow body holds its slots for no longer)."""
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                if body.size + len(chunk) > limit:
                    raise errors.too_large(limit_mb)
                await body.write(chunk)
    except TimeoutError:
        raise errors.UploadTimeout(f"the upload did not arrive within {timeout:g} s") from None
