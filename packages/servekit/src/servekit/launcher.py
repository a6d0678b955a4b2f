"""Run an ASGI app on hypercorn: one address, optional TLS, graceful shutdown on SIGTERM or SIGINT.

The launcher binds the listening socket itself and hands it to hypercorn, so port 0 works and the
real address is known (and announced) before the first request can arrive.
"""

import asyncio
import logging
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
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


def _announce(url: str) -> None:
    print(f"listening on {url}", file=sys.stderr, flush=True)


async def serve_async(
    app: Any,
    listener: Listener,
    *,
    graceful_timeout: float = 10.0,
    on_ready: Callable[[str], None] = _announce,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then finish open requests and return."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    sock = listener.bind()
    port = sock.getsockname()[1]
    config = Config()
    # hypercorn owns the descriptor from here on and closes it when it stops.
    config.bind = [f"fd://{sock.detach()}"]
    config.certfile = listener.certfile
    config.keyfile = listener.keyfile
    config.graceful_timeout = graceful_timeout
    config.errorlog = logging.getLogger("hypercorn.error")
    config.accesslog = None
    on_ready(listener.url(port))
    try:
        await hypercorn_serve(app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def serve(app: Any, listener: Listener, **options: Any) -> None:
    """Blocking form of `serve_async`, for console scripts."""
    asyncio.run(serve_async(app, listener, **options))
