"""Run an ASGI app on hypercorn: one address, optional TLS, graceful shutdown on SIGTERM or SIGINT.

The launcher binds the listening socket itself and hands it to hypercorn, so port 0 works and the
real address is known (and announced) before the first request can arrive.
"""

import asyncio
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config


@dataclass(frozen=True)
class Listener:
    """Where a server listens. With a certificate and key it speaks HTTPS (and HTTP/2)."""

    host: str = "127.0.0.1"
    port: int = 8000
    certfile: str | None = None
    keyfile: str | None = None

    def __post_init__(self) -> None:
        if (self.certfile is None) != (self.keyfile is None):
            raise ValueError("TLS needs both a certificate file and a key file")

    @property
    def tls(self) -> bool:
        return self.certfile is not None

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port if port is None else port}"

    def bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        return socket.create_server((self.host, self.port), family=family, backlog=1024)


def _send_reason_phrases() -> None:
    """h11 (hypercorn's HTTP/1.1) writes `HTTP/1.1 429 ` with an empty reason phrase; tools and
    people show the status line as is. Its writer table is the one place that builds that line,
    so our writer there adds the standard phrase (`429 Too Many Requests`) and nothing else."""
    from h11 import _writers
    from h11._state import IDLE, SEND_RESPONSE, SERVER

    if _writers.WRITERS[(SERVER, SEND_RESPONSE)] is not _writers.write_any_response:
        return  # done already (or someone else's writer: leave it)

    def write_response(response: Any, write: Callable[[bytes], Any]) -> None:
        if response.reason or response.http_version != b"1.1":
            _writers.write_any_response(response, write)
            return
        try:
            phrase = HTTPStatus(response.status_code).phrase.encode("ascii")
        except ValueError:
            phrase = b"Unknown"
        write(b"HTTP/1.1 %d %s\r\n" % (response.status_code, phrase))
        _writers.write_headers(response.headers, write)

    _writers.WRITERS[(SERVER, IDLE)] = write_response
    _writers.WRITERS[(SERVER, SEND_RESPONSE)] = write_response


def _announce(url: str) -> None:
    print(f"listening on {url}", file=sys.stderr, flush=True)


async def serve_async(
    app: Any,
    listener: Listener,
    *,
    graceful_timeout: float = 10.0,
    on_ready: Callable[[str], None] = _announce,
    stop: asyncio.Event | None = None,
    before_shutdown: Callable[[], Awaitable[None]] | None = None,
    max_websocket_message: int = 64 * 1024,
) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then finish open requests and return.

    `before_shutdown` runs once the signal came and while the server still answers (a service
    refusing new work with 503 while its running work ends); the listener closes after it.
    A WebSocket message from a client larger than `max_websocket_message` closes its connection
    (1009): hypercorn holds a whole message before the app sees it, 16 MiB by default."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    _send_reason_phrases()
    sock = listener.bind()
    port = sock.getsockname()[1]
    config = Config()
    # hypercorn owns the descriptor from here on and closes it when it stops.
    config.bind = [f"fd://{sock.detach()}"]
    config.certfile = listener.certfile
    config.keyfile = listener.keyfile
    config.graceful_timeout = graceful_timeout
    config.websocket_max_message_size = max_websocket_message
    config.errorlog = logging.getLogger("hypercorn.error")
    config.accesslog = None
    on_ready(listener.url(port))

    async def shutdown_trigger() -> None:
        await stop.wait()
        if before_shutdown is not None:
            await before_shutdown()

    try:
        await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def serve(app: Any, listener: Listener, **options: Any) -> None:
    """Blocking form of `serve_async`, for console scripts."""
    asyncio.run(serve_async(app, listener, **options))
