"""The cross-origin policy of a server, as one value that builds Starlette's CORS middleware.

jobrunner is anonymous and allows every origin; marks serves a personal library and allows only
the origins it is told about (and, optionally, browser-extension origins), never `*`.
"""

from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from servekit.errors import error_response

# chrome-extension://<32 letters a-p>, moz-extension://<uuid>, safari-web-extension://<uuid>
EXTENSION_ORIGINS = (
    r"^(chrome-extension://[a-p]{32}|(moz|safari-web)-extension://[0-9a-fA-F-]{36})$"
)


class _CORSMiddleware(CORSMiddleware):
    """Starlette's, except that a refused preflight is the JSON error body every other error is,
    and carries no CORS header at all (nothing in it may look like a grant)."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code == 200:
            return response
        details = bytes(response.body).decode("utf-8", "replace")
        return error_response(400, "CORS preflight refused", details, headers={"Vary": "Origin"})


@dataclass(frozen=True)
class CorsPolicy:
    allow_any_origin: bool = False
    origins: tuple[str, ...] = ()
    allow_extensions: bool = False
    methods: tuple[str, ...] = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
    headers: tuple[str, ...] = ("*",)
    expose_headers: tuple[str, ...] = field(default=())
    max_age: int = 600

    @classmethod
    def anyone(cls, **options: Any) -> "CorsPolicy":
        return cls(allow_any_origin=True, **options)

    @classmethod
    def only(cls, *origins: str, allow_extensions: bool = False, **options: Any) -> "CorsPolicy":
        if "*" in origins:
            raise ValueError("use CorsPolicy.anyone() to allow every origin")
        return cls(
            origins=tuple(o.rstrip("/") for o in origins),
            allow_extensions=allow_extensions,
            **options,
        )

    def middleware(self) -> Middleware:
        return Middleware(
            _CORSMiddleware,
            allow_origins=["*"] if self.allow_any_origin else list(self.origins),
            allow_origin_regex=EXTENSION_ORIGINS if self.allow_extensions else None,
            allow_methods=list(self.methods),
            allow_headers=list(self.headers),
            expose_headers=list(self.expose_headers),
            # Credentials never travel cross-origin: neither server uses cookies.
            allow_credentials=False,
            max_age=self.max_age,
        )
