"""A cluster node's HTTP interface: the worker's routes, each answered for any job of the
cluster. A job this node holds is answered from memory as in the embedded mode; any other from
the store (status, logs, the live log) or through the node that ran it (outputs, downloads).
While the store is away, every route answers 503 `Cluster unavailable` at once.
"""

import asyncio
import codecs
import contextlib
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from jobrunner import errors, proxying
from jobrunner.cluster.service import ClusterService
from jobrunner.logformat import client_key
from jobrunner.node.app import (
    _follow,
    _log_chunks,
    interface,
    submission,
    unless_gone,
    wait_seconds,
)
from jobrunner.node.edge import drop_small_body, refusal_recorder, refuse_websocket
from jobrunner.ratelimit import StreamSlot
from jobrunner.wire import OutputListing
from servekit import (
    ClientFile,
    ClientStream,
    JSONResponse,
    TrustedProxies,
    client_ip,
    descriptors,
    rate_key,
)

_DOWNLOAD_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


def build_cluster_app(
    service: ClusterService, trusted: TrustedProxies, warning: str | None = None
) -> Starlette:
    s = service.settings
    limit = s.max_upload_mb * 2**20
    metrics = service.metrics
    store = service.store

    def client(connection: HTTPConnection) -> str:
        """The client's rate key, as the embedded app derives it (`node/app.py`): the service and
        the store count keys and parse no addresses."""
        return rate_key(client_ip(connection, trusted), s.rate_ipv6_prefix)

    def pseudonym(connection: HTTPConnection) -> str:
        return client_key(client(connection))

    def open_stream(connection: HTTPConnection) -> StreamSlot:
        """As the embedded app: 503 while the process is short of open files."""
        if descriptors.running_low():
            raise errors.short_of_files()
        return service.open_stream(client(connection))

    on_refusal = refusal_recorder(metrics, pseudonym)

    async def info(request: Request) -> Response:
        store.check()
        await service.refresh_view()
        return JSONResponse(service.info(warning))

    async def submit(request: Request) -> Response:
        who = client(request)
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > limit:
            raise errors.too_large(s.max_upload_mb)
        stream = None  # `?wait=S`: the long poll's stream, taken before the upload
        try:
            seconds = wait_seconds(request)
            if descriptors.running_low():
                raise errors.short_of_files()
            reservation = await service.admit_cluster(who)
            if seconds is not None:
                try:
                    stream = open_stream(request)
                except errors.JobrunnerError:
                    await service.cancel_reservation(reservation)
                    raise
        except errors.JobrunnerError:
            await drop_small_body(request)
            raise
        try:
            deadline = time.monotonic() + s.upload_timeout
            handed_over = False
            try:
                async with submission(
                    request, limit, s.max_upload_mb, deadline, s.upload_timeout
                ) as (manifest, parts):
                    handed_over = True
                    result = await service.submit_cluster(
                        who, manifest, parts, reservation, deadline
                    )
            except BaseException:
                if not handed_over:
                    await service.cancel_reservation(reservation)
                raise
            if seconds is None:
                return JSONResponse(result)
            # Submit and wait in one request, as at an embedded server. The job is queued now:
            # if the store cannot be asked meanwhile, the answer is the acceptance, which names it.
            try:
                record = await unless_gone(request, service.cluster_wait(result.job_id, seconds))
            except errors.JobrunnerError:
                return JSONResponse(result)
            if record is None:
                return Response(status_code=204)
            return JSONResponse(record)
        finally:
            if stream is not None:
                stream.close()

    async def status(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        seconds = wait_seconds(request)
        if seconds is None:
            return JSONResponse(await service.cluster_status(job_id))
        await service.fields(job_id)  # 404 before a slot is taken
        slot = open_stream(request)
        try:
            record = await unless_gone(request, service.cluster_wait(job_id, seconds))
        finally:
            slot.close()
        if record is None:
            return Response(status_code=204)
        return JSONResponse(record)

    async def cancel(request: Request) -> Response:
        return JSONResponse(await service.cluster_cancel(request.path_params["job_id"]))

    async def logs(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        await service.fields(job_id)
        slot = open_stream(request)
        local = service.jobs.get(job_id)
        chunks = _log_chunks(local.log) if local is not None else _decoded(service, job_id)
        return ClientStream(
            chunks,
            media_type="text/plain; charset=utf-8",
            on_close=metrics.counted("log", slot.close),
        )

    async def outputs(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        url = await service.node_of(job_id)
        if url is None:
            return JSONResponse(
                service.outputs(job_id) if job_id in service.jobs else _none(job_id)
            )
        assert service.session is not None
        return await proxying.proxy(
            f"{url}/outputs/{job_id}", service.session, client_ip(request, trusted)
        )

    async def download(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        url = await service.node_of(job_id)
        slot = open_stream(request)
        close = metrics.counted("download", slot.close)
        if url is not None:
            assert service.session is not None
            path = proxying.output_path(request.path_params["filepath"])
            upstream = f"{url}/download/{job_id}/{path}"
            return await proxying.proxy(
                upstream, service.session, client_ip(request, trusted), close
            )
        try:
            found = service.download(job_id, request.path_params["filepath"])
        except BaseException:
            close()
            raise
        return ClientFile(
            found.path,
            media_type=found.media_type,
            filename=found.name,
            headers=_DOWNLOAD_HEADERS,
            on_close=close,
        )

    async def stats(request: Request) -> Response:
        return JSONResponse(await service.cluster_stats(client(request)))

    async def environments(request: Request) -> Response:
        store.check()
        return JSONResponse(service.environment_listing())

    async def health(request: Request) -> Response:
        store.check()
        return JSONResponse(service.health(request.query_params.get("challenge")))

    async def stream(websocket: WebSocket) -> None:
        job_id = websocket.path_params["job_id"]
        try:
            await service.fields(job_id)
        except (errors.JobNotFound, errors.ClusterUnavailable) as error:
            await websocket.accept()
            if isinstance(error, errors.JobNotFound):
                await websocket.close(4404, "Job not found")
            else:
                await websocket.close(1013, "Cluster unavailable")
            return
        try:
            slot = open_stream(websocket)
        except (errors.RateLimited, errors.Busy) as error:
            await refuse_websocket(websocket, error, on_refusal)
            return
        close = metrics.counted("websocket", slot.close)
        try:
            await websocket.accept()
            local = service.jobs.get(job_id)
            with contextlib.suppress(WebSocketDisconnect):
                if local is not None:
                    await _follow(websocket, local, s.follower_stall)
                else:
                    await _follow_store(websocket, service, job_id)
        finally:
            close()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
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
        lifespan=lifespan,
        metrics=metrics,
        on_refusal=on_refusal,
    )


def _none(job_id: str) -> OutputListing:
    """The outputs of a job that has none here yet (queued, or running elsewhere not yet)."""
    return OutputListing(job_id, [])


async def _decoded(service: ClusterService, job_id: str) -> AsyncIterator[bytes]:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    async for chunk in service.logs.read(job_id):
        yield decoder.decode(chunk).encode()
    yield decoder.decode(b"", final=True).encode()


async def _follow_store(websocket: WebSocket, service: ClusterService, job_id: str) -> None:
    """The live log of a job another node runs, from the store's stream; closed 1000 with the
    final state, as a node closes its own."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        async for item in service.logs.follow(job_id):
            if isinstance(item, str):
                tail = decoder.decode(b"", final=True)
                if tail:
                    await websocket.send_text(tail)
                await websocket.close(1000, item)
                return
            if item:
                text = decoder.decode(item)
                if text:
                    await websocket.send_text(text)
                continue
            fields = await service.cq.job(job_id)  # nothing came: is it still there?
            if not fields:
                await websocket.close(4404, "Job not found")
                return
    except errors.ClusterUnavailable:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(websocket.close(1013, "Cluster unavailable"), 5)
