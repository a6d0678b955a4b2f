"""The HTTP edge: each domain error class answers one status and error title, decided here once.

The worker's app and the pool's app both register `exception_handlers()`, so a service never builds
a response for a refusal; it raises a `JobrunnerError` subclass and this table says how it looks.
"""

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from jobrunner import errors
from servekit import HTTPError
from servekit import exception_handlers as servekit_handlers

_STATUS: dict[type[errors.JobrunnerError], tuple[int, str]] = {
    errors.InvalidManifest: (400, "Invalid manifest"),
    errors.InvalidChallenge: (400, "Invalid challenge"),
    errors.JobNotFound: (404, "Job not found"),
    errors.FileNotFound: (404, "File not found"),
    errors.UploadTimeout: (408, "Request timeout"),
    errors.TooLarge: (413, "Request too large"),
    errors.WorkerUnreachable: (502, "Worker unreachable"),
    errors.NoWorkerAvailable: (503, "No worker available"),
    errors.UpgradeRequired: (426, "Upgrade required"),
    errors.RateLimited: (429, "Rate limit exceeded"),
    errors.ShuttingDown: (503, "Service unavailable"),
}


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
    return HTTPError(status, title, error.details)


async def _on_domain_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.JobrunnerError)
    return http_error(exc).response()


def exception_handlers() -> dict[Any, Any]:
    return {**servekit_handlers(), errors.JobrunnerError: _on_domain_error}
