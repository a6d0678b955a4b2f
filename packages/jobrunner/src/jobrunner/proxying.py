"""Passing a read on to the node that holds the job: a plain GET (a log, an output listing, a
download) or a live log over WebSocket. Shared by `jobrunner pool` (its workers) and the cluster
mode of `jobrunner serve` (the node that ran the job, which keeps its outputs).

Upstream URLs are built from what the routes parsed and checked (a known job id, an output path
without empty, `.` or `..` segments), each part percent-encoded again, never from the path the
client sent: `/download/ID/%2e%2e/%2e%2e/stats` must not reach a node's `/stats`.
"""

from collections.abc import AsyncIterator, Callable
from urllib.parse import quote

import aiohttp
from starlette.responses import Response
from starlette.websockets import WebSocket
from yarl import URL

from jobrunner import errors
from servekit import ClientStream, while_connected

PASSED_HEADERS = (
    "content-type",
    "content-disposition",
    "x-content-type-options",
    "content-security-policy",
    "content-length",
    "retry-after",
)


def output_path(path: str) -> str:
    """An output path as a URL path, or 404: only plain relative segments are passed on."""
    segments = path.split("/")
    if any(part in ("", ".", "..") or "\0" in part for part in segments):
        raise errors.file_not_found(path)
    return "/".join(quote(part, safe="") for part in segments)


async def proxy(
    upstream: str,
    session: aiohttp.ClientSession,
    client: str,
    on_close: Callable[[], None] | None = None,
) -> Response:
    """The upstream answer, streamed to the client while it reads. The upstream node counts the
    client's streams too (it must trust this one as a proxy): `client` goes in X-Forwarded-For."""
    try:
        reply = await session.get(URL(upstream, encoded=True), headers={"X-Forwarded-For": client})
    except BaseException as error:
        if on_close is not None:
            on_close()  # no response will start that could give the slot back
        if isinstance(error, aiohttp.ClientError | TimeoutError):
            raise errors.WorkerUnreachable(type(error).__name__) from None
        raise
    headers = {k: v for k, v in reply.headers.items() if k.lower() in PASSED_HEADERS}

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in reply.content.iter_chunked(1 << 16):
                yield chunk
        finally:
            reply.release()

    # Read from upstream only while the client is there to take it.
    return ClientStream(body(), reply.status, headers=headers, on_close=on_close)


async def relay(
    websocket: WebSocket, session: aiohttp.ClientSession, node_url: str, job: str, client: str
) -> None:
    """Pass the node's live log on, with its close code; stop at once if the client leaves."""
    url = URL(node_url.replace("http", "ws", 1) + f"/logs/{job}/stream", encoded=True)
    try:
        forwarded = {"X-Forwarded-For": client}
        async with session.ws_connect(url, heartbeat=30, headers=forwarded) as upstream:

            async def pump() -> None:
                while True:
                    message = await upstream.receive()
                    if message.type == aiohttp.WSMsgType.TEXT:
                        await websocket.send_text(message.data)
                        continue
                    # The node's close code and reason (1000 + final status, 1013, ...).
                    if message.type == aiohttp.WSMsgType.CLOSE:
                        await websocket.close(message.data or 1000, message.extra or "")
                    else:
                        await websocket.close(1011, "worker lost")
                    return

            await while_connected(websocket, pump())
    except aiohttp.WSServerHandshakeError as refused:
        if refused.status == 429:  # the node's own per-client limit (a client also going direct)
            await websocket.close(1013, "too many log streams; try again later")
        else:
            await websocket.close(1011, "worker lost")
    except (aiohttp.ClientError, TimeoutError):
        await websocket.close(1011, "worker lost")
