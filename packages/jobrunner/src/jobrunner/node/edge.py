"""The HTTP edge: each domain error class answers one status and error title, decided here once.

The worker's app and the pool's app both register `exception_handlers()`, so a service never builds
a response for a refusal; it raises a `JobrunnerError` subclass and this table says how it looks.
"""

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from jobrunner import errors
from jobrunner.metrics import Metrics
from jobrunner.refusallog import RefusalLog
from servekit import HTTPError
from servekit import exception_handlers as servekit_handlers

# Told of each refusal: the connection, the error, its `refusal_reason` and the HTTP status.
OnRefusal = Callable[[HTTPConnection, errors.JobrunnerError, str, int], None]

_STATUS: dict[type[errors.JobrunnerError], tuple[int, str]] = {
    errors.InvalidManifest: (400, "Invalid manifest"),
    errors.InvalidChallenge: (400, "Invalid challenge"),
    errors.InvalidParameter: (400, "Invalid parameter"),
    errors.JobNotFound: (404, "Job not found"),
    errors.FileNotFound: (404, "File not found"),
    errors.UploadTimeout: (408, "Request timeout"),
    errors.JobFinished: (409, "Job already finished"),
    errors.TooLarge: (413, "Request too large"),
    errors.WorkerUnreachable: (502, "Worker unreachable"),
    errors.NoWorkerAvailable: (503, "No worker available"),
    errors.UpgradeRequired: (426, "Upgrade required"),
    errors.RateLimited: (429, "Rate limit exceeded"),
    errors.ShuttingDown: (503, "Service unavailable"),
    errors.Busy: (503, "Service unavailable"),
    errors.ClusterUnavailable: (503, "Cluster unavailable"),
}


# The `reason` label of each refusal that is not a rate limit or a lack of capacity (see
# `refusal_reason`). A subclass comes before its base class. Answers that refuse no work (404, a
# plain request on the WebSocket route, a bad health challenge) are not refusals.
_REASONS: dict[type[errors.JobrunnerError], str] = {
    errors.InvalidFiles: "invalid_files",
    errors.InvalidManifest: "invalid_manifest",
    errors.TooLarge: "too_large",
    errors.UploadTimeout: "upload_timeout",
    errors.ShuttingDown: "shutting_down",
    errors.NoWorkerAvailable: "no_worker",
    errors.WorkerUnreachable: "worker_unreachable",
    errors.ClusterUnavailable: "cluster_unavailable",
}


def refusal_reason(error: errors.JobrunnerError) -> str | None:
    """A short, stable name of why work was refused (`rate_cpu`, `busy_open_files`, `too_large`),
    or None when the error refuses nothing."""
    if isinstance(error, errors.RateLimited):
        return f"rate_{error.limit or 'limit'}"
    if isinstance(error, errors.Busy):
        return f"busy_{error.short_of}"
    return next((name for kind, name in _REASONS.items() if isinstance(error, kind)), None)


def refusal_recorder(metrics: Metrics, client: Callable[[HTTPConnection], str]) -> OnRefusal:
    """What the worker and the pool do with a refusal: count it by reason and log it (at most a
    line per client and reason every few seconds, see `refusallog`), the client named by
    `client` (a pseudonym, see `logformat.client_key`)."""
    logged = RefusalLog()

    def refused(
        connection: HTTPConnection, error: errors.JobrunnerError, reason: str, status: int
    ) -> None:
        metrics.refused(reason)
        logged(client(connection), reason, status)

    return refused


def http_error(error: errors.JobrunnerError) -> HTTPError:
    """The JSON error body (status, title, details, extra fields) of a domain error."""
    status, title = next(
        (value for kind, value in _STATUS.items() if isinstance(error, kind)),
        (500, "Internal server error"),
    )
    if isinstance(error, errors.RateLimited):
        return HTTPError(
            status,
            title,
            reason=error.reason,
            retry_after=error.retry_after,
            headers={"Retry-After": str(error.retry_after)},
        )
    if isinstance(error, errors.UpgradeRequired):
        headers = {"Upgrade": "websocket", "Connection": "Upgrade"}
        return HTTPError(status, title, error.details, headers=headers)
    if isinstance(error, errors.NoWorkerAvailable) and error.retry_after is not None:
        return HTTPError(
            status, title, error.details, headers={"Retry-After": str(error.retry_after)}
        )
    if isinstance(error, errors.ShuttingDown):
        return HTTPError(status, title, error.details, headers={"Retry-After": "30"})
    if isinstance(error, errors.ClusterUnavailable):
        return HTTPError(status, title, error.details, headers={"Retry-After": "1"})
    if isinstance(error, errors.Busy):
        headers = {"Retry-After": str(error.retry_after)}
        return HTTPError(status, title, error.details, headers=headers)
    return HTTPError(status, title, error.details)


def _answer(
    connection: HTTPConnection, error: errors.JobrunnerError, on_refusal: OnRefusal | None
) -> HTTPError:
    refusal = http_error(error)
    if on_refusal is not None and (reason := refusal_reason(error)) is not None:
        on_refusal(connection, error, reason, refusal.status)
    return refusal


async def _on_client_gone(request: Request, exc: Exception) -> Response:
    # The client left in the middle of its request body: nobody reads this, nothing to log.
    return Response(status_code=400)


def exception_handlers(on_refusal: OnRefusal | None = None) -> dict[Any, Any]:
    async def on_domain_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, errors.JobrunnerError)
        return _answer(request, exc, on_refusal).response()

    return {
        **servekit_handlers(),
        errors.JobrunnerError: on_domain_error,
        ClientDisconnect: _on_client_gone,
    }


async def refuse_websocket(
    websocket: WebSocket, error: errors.JobrunnerError, on_refusal: OnRefusal | None = None
) -> None:
    """Answer a WebSocket handshake with the HTTP error a plain request would get (a `429` with
    its JSON body and `Retry-After`); a server without the ASGI denial-response extension gets
    the socket accepted and closed `1013` with the error's reason."""
    refusal = _answer(websocket, error, on_refusal)
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(refusal.response())
        return
    await websocket.accept()
    reason = str(refusal.extra.get("reason") or refusal.details or refusal.error)
    await websocket.close(1013, reason[:120])


# A refused upload of at most this size is read (and dropped) before the refusal is sent.
DRAIN_BYTES = 1 << 20
DRAIN_SECONDS = 2.0


async def drop_small_body(request: Request) -> None:
    """Read and drop the body of a request refused from its headers, if it is small.

    An HTTP/1.1 server that answers before the body arrived must close the connection (hypercorn
    does), and the kernel then resets it while the client is still writing: a client that reads
    only after sending everything (aiohttp, requests) sees a reset instead of the `429`. Reading
    up to `DRAIN_BYTES` within `DRAIN_SECONDS` costs nothing in memory and gives such clients
    the answer; a larger body is refused at once, as before, without being read.
    """
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > DRAIN_BYTES):
        return
    received = 0
    with contextlib.suppress(TimeoutError, ClientDisconnect):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for chunk in request.stream():
                received += len(chunk)
                if received > DRAIN_BYTES:
                    return
