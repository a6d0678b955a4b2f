"""Run an ASGI app on hypercorn: one address, optional TLS, graceful shutdown on SIGTERM or SIGINT.

The launcher binds the listening socket itself and hands it to hypercorn, so port 0 works and the
real address is known (and announced) before the first request can arrive.

It speaks HTTP/1.1 only, with and without TLS. hypercorn's HTTP/2 takes whatever the app sends into
its own per-stream buffers and hands it to the socket only as the client's flow-control window
allows, with no bound: 100 streams of a 10 MB download that never sent `WINDOW_UPDATE` took a
server from 38 MB to 1 GB, still held after the connection closed. HTTP/1.1 writes wait for the
socket (backpressure), and the clients of these servers (job APIs, command lines) gain nothing
from multiplexing. So ALPN offers `http/1.1` alone, the HTTP/2 preface on plain HTTP ("prior
knowledge") is answered `505 HTTP Version Not Supported` and closed, and `Upgrade: h2c` is
ignored (the request is answered in HTTP/1.1, as RFC 9110 lets a server do).
"""

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from hypercorn.asyncio import serve as hypercorn_serve
from hypercorn.config import Config

from servekit import descriptors
from servekit.connections import free_when_closed
from servekit.streaming import first_of

log = logging.getLogger("servekit")

# Connections the kernel completes and holds for the server to accept. Beyond them a client's
# SYN is dropped and its connect waits for the retransmission (1 s, then 3 s): at hypercorn's
# default of 100, 300 clients connecting at once to a server busy for 50 ms were all answered
# after 1.1 s instead of 0.17 s (`make bench`, servekit).
# hypercorn calls `listen` again with its own `backlog`, so both places use this one.
BACKLOG = 1024


@dataclass(frozen=True)
class Listener:
    """Where a server listens. With a certificate and key it speaks HTTPS (HTTP/1.1 only)."""

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

    def bind(self, write_timeout: float | None = None) -> socket.socket:
        """The listening socket. With `write_timeout`, each connection accepted from it is
        dropped by the kernel once data it was sent stays unacknowledged (a client that stopped
        reading: a zero window; or one that vanished) for that many seconds (TCP_USER_TIMEOUT,
        which accepted sockets inherit; Linux)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family, backlog=BACKLOG)
        if write_timeout is not None and hasattr(socket, "TCP_USER_TIMEOUT"):
            milliseconds = max(1, round(write_timeout * 1000))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, milliseconds)
        return sock


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


# The changes made to hypercorn in this process, each made once however many servers start.
_PATCHED: set[str] = set()


class _Http2Refused(Exception):
    """The HTTP/2 connection preface arrived on an HTTP/1.1 connection (answered 505)."""


def _http1_only() -> None:
    """Make hypercorn answer the HTTP/2 preface with `505` and ignore `Upgrade: h2c` (see the
    module's docstring). Its h11 protocol decides in one method, `_check_protocol`, whether a
    request switches the connection to HTTP/2; ours never does. The wrapper that would then
    switch protocols closes the connection instead."""
    from hypercorn.events import Closed
    from hypercorn.protocol import ProtocolWrapper
    from hypercorn.protocol.h11 import H11Protocol

    if "http1_only" in _PATCHED:
        return

    async def check_protocol(self: H11Protocol, event: Any) -> None:
        if event.method == b"PRI" and event.target == b"*" and event.http_version == b"2.0":
            await self._send_error_response(505)
            raise _Http2Refused

    wrapped = ProtocolWrapper.handle

    async def handle(self: ProtocolWrapper, event: Any) -> None:
        try:
            await wrapped(self, event)
        except _Http2Refused:
            await self.send(Closed())

    _PATCHED.add("http1_only")
    H11Protocol._check_protocol = check_protocol  # type: ignore[method-assign]
    ProtocolWrapper.handle = handle  # type: ignore[method-assign]


def _timed_out_is_closed() -> None:
    """A connection the kernel dropped for the write timeout fails with ETIMEDOUT, which hypercorn
    does not expect where it expects a reset (ECONNRESET): the app's `send` raised it and the
    connection's task logged a traceback. Both places now treat it as the reset it amounts to."""
    from hypercorn.asyncio.tcp_server import TCPServer
    from hypercorn.events import Closed

    if "timed_out_is_closed" in _PATCHED:
        return
    protocol_send, close = TCPServer.protocol_send, TCPServer._close

    async def send(self: TCPServer, event: Any) -> None:
        try:
            await protocol_send(self, event)
        except TimeoutError:
            await self.protocol.handle(Closed())

    async def closed(self: TCPServer) -> None:
        with contextlib.suppress(TimeoutError):
            await close(self)

    _PATCHED.add("timed_out_is_closed")
    TCPServer.protocol_send = send  # type: ignore[method-assign]
    TCPServer._close = closed  # type: ignore[method-assign]


def _open_files() -> None:
    """Raise the soft limit of open files to the hard one, and keep the accept loop's complaint
    when they run out to one line a minute (see `servekit.descriptors`)."""
    before, after = descriptors.raise_limit()
    if after != before:
        log.info("open files: soft limit raised from %d to %d", before, after)
    loop = asyncio.get_running_loop()
    if not isinstance(loop.get_exception_handler(), descriptors.QuietAccept):
        loop.set_exception_handler(descriptors.QuietAccept(loop))


def _announce(url: str) -> None:
    print(f"listening on {url}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SideApp:
    """A second app the same process serves on a listener of its own (metrics for an operator,
    say), announced as `<name> on <url>` before the main listener's `listening on <url>`. It
    keeps answering while the main app drains and stops once the main listener has closed."""

    app: Any
    listener: Listener
    name: str
    announce: Callable[[str], None] | None = None  # instead of the line on stderr


def _config(
    sock: socket.socket, listener: Listener, graceful_timeout: float, max_websocket_message: int
) -> Config:
    config = Config()
    # hypercorn owns the descriptor from here on and closes it when it stops.
    config.bind = [f"fd://{sock.detach()}"]
    config.backlog = BACKLOG  # it listens again on the socket with this (see BACKLOG)
    config.certfile = listener.certfile
    config.keyfile = listener.keyfile
    config.alpn_protocols = ["http/1.1"]  # never h2 (see the module's docstring)
    config.graceful_timeout = graceful_timeout
    config.websocket_max_message_size = max_websocket_message
    config.errorlog = logging.getLogger("hypercorn.error")
    config.accesslog = None
    return config


async def serve_async(
    app: Any,
    listener: Listener,
    *,
    graceful_timeout: float = 10.0,
    on_ready: Callable[[str], None] = _announce,
    stop: asyncio.Event | None = None,
    before_shutdown: Callable[[], Awaitable[None]] | None = None,
    max_websocket_message: int = 64 * 1024,
    write_timeout: float | None = None,
    side: Sequence[SideApp] = (),
) -> None:
    """Serve until SIGTERM/SIGINT (or `stop` is set), then finish open requests and return.

    `before_shutdown` runs once the signal came and while the server still answers (a service
    refusing new work with 503 while its running work ends); the listener closes after it. A
    second SIGTERM or SIGINT meanwhile cancels it: the operator wants the process gone now (a
    drain can last as long as its service's grace and retention), so the listener closes at once
    and open connections get `graceful_timeout`.
    A WebSocket message from a client larger than `max_websocket_message` closes its connection
    (1009): hypercorn holds a whole message before the app sees it, 16 MiB by default.
    A client that takes nothing of what it is sent for `write_timeout` seconds is dropped (see
    `Listener.bind`). Each of `side` is served on its own listener in the same loop (hypercorn
    serves one app per call, so each is its own `serve`); every socket is bound before any is
    announced, so a listener that cannot bind stops the start."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    _send_reason_phrases()
    _http1_only()
    _timed_out_is_closed()
    free_when_closed()
    _open_files()
    sockets: list[socket.socket] = []
    try:
        sock = listener.bind(write_timeout)
        sockets.append(sock)
        for extra in side:
            sockets.append(extra.listener.bind(write_timeout))
    except BaseException:
        for opened in sockets:
            opened.close()
        raise
    port = sock.getsockname()[1]
    config = _config(sock, listener, graceful_timeout, max_websocket_message)
    side_configs = []
    for extra, side_sock in zip(side, sockets[1:], strict=True):
        side_url = extra.listener.url(side_sock.getsockname()[1])
        side_configs.append(_config(side_sock, extra.listener, 1.0, max_websocket_message))
        if extra.announce is not None:
            extra.announce(side_url)
        else:
            print(f"{extra.name} on {side_url}", file=sys.stderr, flush=True)

    hurry = asyncio.Event()  # a second signal: no more waiting for `before_shutdown`

    def stop_on(signum: signal.Signals) -> None:
        if not stop.is_set():
            log.info("%s received: shutting down", signum.name)
            stop.set()
        elif not hurry.is_set():
            log.info("%s received again: stopping at once", signum.name)
            hurry.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_on, signum)
    closed = asyncio.Event()  # the main listener has stopped: the side apps stop too

    async def shutdown_trigger() -> None:
        await stop.wait()
        if before_shutdown is not None:
            await first_of(before_shutdown(), hurry.wait())

    async def main() -> None:
        try:
            # Announced in the task that goes straight on into hypercorn (its lifespan startup
            # runs before anyone woken by the announcement gets the loop).
            on_ready(listener.url(port))
            await hypercorn_serve(app, config, shutdown_trigger=shutdown_trigger)
        finally:
            closed.set()

    async def serve_side(extra: SideApp, side_config: Config) -> None:
        try:
            await hypercorn_serve(extra.app, side_config, shutdown_trigger=closed.wait)
        finally:
            stop.set()  # a side app that ended by itself (it failed) ends the whole server

    try:
        # Each ends the others gently (`closed`, `stop`); the first failure is raised as it is
        # once all have ended, so callers see the same exceptions as with one app.
        ended = await asyncio.gather(
            main(),
            *(serve_side(extra, conf) for extra, conf in zip(side, side_configs, strict=True)),
            return_exceptions=True,
        )
        for outcome in ended:
            if isinstance(outcome, BaseException):
                raise outcome
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


# Full collections come after this many collections of the middle generation (CPython's default:
# 10). Each one scans every object alive since start-up, frees nothing here (no cyclic garbage per
# request, see `servekit.connections`) and stops the event loop meanwhile: 12 to 28 ms every 23 s
# of bench-hostile's loaded phase on this project's 2-core host.
FULL_COLLECTION_AFTER = 100


def _tune_collector() -> None:
    """Keep what start-up made (modules, classes, the app) out of every later collection, and
    make full collections ten times rarer. With no cyclic garbage left per request
    (`servekit.connections`), a full collection frees nothing and its pause is the scan of every
    object alive: first the imports' (frozen here, after the start-up's own garbage is
    collected), then what serving keeps (finished jobs' records, open connections), which a full
    collection scanned every 10 collections of the middle generation. The young generations are
    collected as often as before, so a cycle made by mistake is still freed young; one that
    lives long enough to reach the oldest generation waits ten times longer."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_AFTER)


def serve(app: Any, listener: Listener, **options: Any) -> None:
    """Blocking form of `serve_async`, for console scripts (whose process is the server's: its
    start-up's objects are frozen and full collections made rarer, `_tune_collector`; an
    embedding program decides that for itself)."""
    _tune_collector()
    asyncio.run(serve_async(app, listener, **options))
