"""The access log of `marks serve`: one line per request on stderr, in the combined log format:

    127.0.0.1 - - [26/Nov/2026:04:50:01 +0000] "GET /bookmarks HTTP/1.1" 200 912 "-" "curl/8.5"

That is nginx's and Apache's default (and hypercorn's), so goaccess, fail2ban and log tools read
it. The request line is written as the client sent it (still percent-encoded); in what a client
controls (the path, referrer, user agent) control characters, quotes and backslashes are written
as `\\xNN`, as nginx writes them, so a request cannot forge a line. No header holding a secret
(Authorization, Cookie) is written, nor a body. A line is written once the answer is sent; a
request that failed is logged as 500, one that ended with no answer (the client went away) as
499, as nginx does.
"""

import sys
import time
from collections.abc import Callable
from typing import Any

from marks.printable import escape

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]


def _quoted(text: str) -> str:
    """A field between quotes: `"` and `\\` as `\\x22` and `\\x5c`, controls escaped."""
    return escape(text.replace("\\", "\\x5c").replace('"', "\\x22")) if text else "-"


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


def line(scope: Scope, status: int, size: int, moment: float) -> str:
    client = scope.get("client")
    host = client[0] if client else "-"
    when = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(moment))
    target = scope.get("raw_path") or scope.get("path", "").encode()
    query = scope.get("query_string", b"")
    if query:
        target += b"?" + query
    method = scope.get("method", "GET")  # a WebSocket handshake is a GET
    request = f"{method} {target.decode('latin-1')} HTTP/{scope.get('http_version', '1.1')}"
    return (
        f'{host} - - [{when}] "{_quoted(request)}" {status} {size or "-"} '
        f'"{_quoted(_header(scope, b"referer"))}" "{_quoted(_header(scope, b"user-agent"))}"'
    )


def _to_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class AccessLog:
    """ASGI middleware: `write` (stderr by default) gets a line per HTTP request or WebSocket."""

    def __init__(self, app: Any, write: Callable[[str], None] = _to_stderr) -> None:
        self.app = app
        self.write = write

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        moment = time.time()
        status: int | None = None
        size = 0

        async def sending(message: Message) -> None:
            nonlocal status, size
            kind = message["type"]
            if kind == "http.response.start":
                status = message["status"]
            elif kind == "http.response.body":
                size += len(message.get("body", b""))
            elif kind == "websocket.accept":
                status = 101
            elif kind == "websocket.close" and status is None:
                status = 403  # refused before the handshake
            await send(message)

        failed = True
        try:
            await self.app(scope, receive, sending)
            failed = False
        finally:
            if status is None:
                status = 500 if failed else 499
            self.write(line(scope, status, size, moment))
