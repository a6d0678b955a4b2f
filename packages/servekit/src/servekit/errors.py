"""The JSON error body both servers send, and Starlette exception handlers that always send it.

Every failure a client sees is `{"error": ..., "details": ..., <extra fields>}`: never an HTML page,
never a traceback or an internal path. Unexpected exceptions are logged with a short reference that
the response repeats, so an operator can find the traceback a user reports.
"""

import logging
import os
import secrets
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from servekit.responses import JSONResponse

log = logging.getLogger("servekit")


class ErrorBody(msgspec.Struct, omit_defaults=True):
    """The error body as a client decodes it; servers may add fields, which decoding ignores."""

    error: str
    details: str | None = None


class HTTPError(Exception):
    """Raise anywhere below a route to answer with the JSON error body."""

    def __init__(
        self,
        status: int,
        error: str,
        details: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(f"{status} {error}: {details}" if details else f"{status} {error}")
        self.status = status
        self.error = error
        self.details = details
        self.headers = dict(headers or {})
        self.extra = extra

    def response(self) -> Response:
        return error_response(
            self.status, self.error, self.details, headers=self.headers, **self.extra
        )


def error_response(
    status: int,
    error: str,
    details: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> Response:
    body: dict[str, Any] = {"error": error}
    if details is not None:
        body["details"] = details
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def _phrase(status: int) -> str:
    """'Not found' rather than 'Not Found': the error strings read as sentences."""
    try:
        return HTTPStatus(status).phrase.capitalize()
    except ValueError:
        return "Error"


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPError)
    return exc.response()


async def _on_starlette_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    phrase = _phrase(exc.status_code)
    # Starlette fills `detail` with the standard phrase when nothing more was said.
    detail = exc.detail if exc.detail and exc.detail != HTTPStatus(exc.status_code).phrase else None
    return error_response(exc.status_code, phrase, detail, headers=exc.headers)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    ref = secrets.token_hex(4)
    log.error(
        "unexpected error (ref %s) on %s %s", ref, request.method, request.url.path, exc_info=exc
    )
    return error_response(500, "Internal server error", _cause(exc, request, ref))


def _cause(exc: Exception, request: Request, ref: str) -> str:
    """The 500's details: what failed, in a sentence a client may read. The exception's own message
    can hold host paths or data, so only its class is named (and, for an OSError, the errno's text,
    which never names a file); the log line with `ref` holds the rest."""
    what = type(exc).__name__
    if isinstance(exc, OSError) and exc.errno:
        what = f"{what} ({os.strerror(exc.errno)})"
    return f"unexpected {what} while answering {request.method} {request.url.path} (ref {ref})"


def exception_handlers() -> dict[Any, Any]:
    """Handlers for `Starlette(exception_handlers=...)`: our errors, routing errors, and crashes."""
    return {
        HTTPError: _on_http_error,
        HTTPException: _on_starlette_http_exception,
        Exception: _on_unexpected,
    }
