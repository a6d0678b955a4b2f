"""The rules every web request of marks follows, shared by the health checker and page content.

One aiohttp session per command; a fixed, polite User-Agent; TLS verified against the system's trust
store; at most `per_host` requests at a time to one host and `concurrency` in all; a timeout per
request. `Scheduler` feeds work to the session from a stream without ever holding the whole stream:
at most `concurrency` tasks run and at most `backlog` items wait, whatever the number of URLs.

Where marks may connect (server-side request forgery): the user's own URL may be on any address,
loopback and the home network included (a bookmark on a NAS is the user's choice), but what a
page leads to -- a redirect to another host, a resource a snapshot inlines (`led_from`) -- must be
on a public address: a page cannot make marks fetch loopback, link-local or private addresses.
And nothing ever reaches marks' own server (`own_server`, registered by `marks serve`). The
address is checked where the connection is made, not where the name is read: the resolver drops
refused answers (so a name that rebinds between two lookups gains nothing), and each connection's
peer address, pooled or new, is checked again before a request is sent on it.
"""

import asyncio
import contextlib
import contextvars
import ipaddress
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from marks import __version__

USER_AGENT = f"marks/{__version__} (bookmark link checker; +https://pypi.org/project/marks/)"
MAX_REDIRECTS = 10

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class ClientSettings:
    concurrency: int = 20
    per_host: int = 4
    timeout: float = 10.0
    max_redirects: int = MAX_REDIRECTS


def host_of(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def origin_of(url: str) -> str:
    """host:port: one server, whose failures say nothing about other ports of the host."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        return f"{(parts.hostname or '').lower()}:{port}"
    except ValueError:
        return ""


# --- where marks may connect ----------------------------------------------------------------

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass
class AddressRules:
    """What the address checks consult besides the system. Empty in real use; a test puts a
    loopback address in `public` to stand for the internet (everything in tests is on loopback)
    and names in `hosts` to stand for DNS. Neither is read from a file, the environment or
    the config: only code in the same process can change them."""

    hosts: dict[str, list[str]] = field(default_factory=dict)
    public: set[str] = field(default_factory=set)
    own: set[tuple[Address, int]] = field(default_factory=set)  # marks' own server(s)


RULES = AddressRules()
# The origin (host:port) the user chose for the request in progress: its own hops may go to any
# address. Set per request by the session's trace hook, or by `led_from` for a page's resources.
_chosen: contextvars.ContextVar[str | None] = contextvars.ContextVar("chosen", default=None)
_page: contextvars.ContextVar[str | None] = contextvars.ContextVar("page", default=None)


class RefusedAddress(aiohttp.ClientConnectionError):
    """A connection the rules above forbid; its message says which and why."""


def _address(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def is_public(address: Address) -> bool:
    """On the internet: not loopback, link-local, private (RFC 1918, unique local), shared
    (CGNAT), multicast, reserved or unspecified -- what Python's `is_global` says, plus the
    test's stand-ins."""
    return (address.is_global and not address.is_multicast) or str(address) in RULES.public


def own_server(host: str, port: int) -> None:
    """`marks serve` listens here: no fetch of marks may reach it (a bookmark of the server's own
    API would have it call itself with the user's rights). A wildcard bind covers every
    non-public address on that port."""
    address = _address("127.0.0.1" if host == "localhost" else host)
    if address is not None:
        RULES.own.add((address, port))


def _is_own(address: Address, port: int) -> bool:
    for own, own_port in RULES.own:
        if port == own_port and (
            address == own or address.is_loopback or (own.is_unspecified and not is_public(address))
        ):
            return True
    return False


def refusal(address: Address, port: int, origin: str) -> str | None:
    """Why marks may not connect to `address:port` for a hop to `origin` (host:port), or None."""
    if _is_own(address, port):
        return f"{address} port {port} is marks' own server"
    chosen = _chosen.get()
    if chosen is not None and origin != chosen and not is_public(address):
        return (
            f"{origin} is at {address}, a private address, reached from {chosen} "
            "(only the bookmark's own host may be private)"
        )
    return None


@contextlib.contextmanager
def led_from(url: str) -> Iterator[None]:
    """Requests in this block are resources of the page at `url` (a snapshot's images, styles,
    fonts): only that page's own host may be private for them, as for a redirect."""
    token = _page.set(origin_of(url))
    try:
        yield
    finally:
        _page.reset(token)


async def _on_request_start(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: Any
) -> None:
    # Runs in the requesting task before its first hop: every hop of this request (redirects
    # included) is judged against the origin the user chose.
    _chosen.set(_page.get() or origin_of(str(params.url)))


class SpecialUseResolver(AbstractResolver):
    """The system resolver, except for names RFC 6761 reserves as never resolving (`.invalid`):
    those fail at once as NXDOMAIN, without a query leaving the machine. Answers the rules
    refuse for this request are dropped; if none is left, the lookup fails saying why."""

    def __init__(self) -> None:
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.rstrip(".").lower()
        if name == "invalid" or name.endswith(".invalid"):
            raise OSError(socket.EAI_NONAME, f"{host} does not exist (RFC 6761 .invalid)")
        if name in RULES.hosts:
            found: list[ResolveResult] = [
                {"hostname": host, "host": ip, "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}
                for ip in RULES.hosts[name]
            ]  # fmt: skip
        else:
            found = await self._inner.resolve(host, port, family)
        kept, reasons = [], []
        for answer in found:
            address = _address(answer["host"])
            reason = refusal(address, port, f"{name}:{port}") if address else None
            if reason is None:
                kept.append(answer)
            else:
                reasons.append(reason)
        if not kept:
            raise RefusedAddress(f"not fetched: {reasons[0]}")
        return kept

    async def close(self) -> None:
        await self._inner.close()


class GuardedConnector(aiohttp.TCPConnector):
    """Checks the peer of every connection a request is about to use, new or pooled (a pooled
    connection was made for another request, whose rules may have been wider)."""

    async def connect(self, req: Any, traces: Any, timeout: aiohttp.ClientTimeout) -> Any:
        origin = origin_of(str(req.url))
        literal = _address(req.url.raw_host or "")
        if literal is not None:  # an address in the URL: refused before any packet is sent
            reason = refusal(literal, req.url.port or 0, origin)
            if reason is not None:
                raise RefusedAddress(f"not fetched: {reason}")
        connection = await super().connect(req, traces, timeout)
        transport = connection.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        address = _address(str(peer[0])) if peer else None
        reason = refusal(address, int(peer[1]), origin) if address and peer else None
        if reason is not None:
            connection.close()
            raise RefusedAddress(f"not fetched: {reason}")
        return connection


def tls_context() -> ssl.SSLContext:
    """Certificates checked against the system's trust store (OpenSSL's default paths)."""
    return ssl.create_default_context()


def session(settings: ClientSettings) -> aiohttp.ClientSession:
    connector = GuardedConnector(
        limit=settings.concurrency,
        limit_per_host=settings.per_host,
        ssl=tls_context(),
        resolver=SpecialUseResolver(),
        # No cache of answers: each new connection asks the resolver, which applies the rules
        # of the request making it (a cached answer was judged for another request).
        use_dns_cache=False,
    )
    tracing = aiohttp.TraceConfig()
    tracing.on_request_start.append(_on_request_start)
    return aiohttp.ClientSession(
        connector=connector,
        trace_configs=[tracing],
        headers={"User-Agent": USER_AGENT},
        timeout=aiohttp.ClientTimeout(total=settings.timeout),
        max_line_size=16384,
        max_field_size=16384,
    )


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await response.content.read(min(65536, limit + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit], True


class Scheduler(Generic[T, R]):
    """Runs `work(item)` for a stream of items: at most `concurrency` at once, at most `per_host`
    for one host, at most `backlog` items read ahead. Items of a busy host wait while other
    hosts' items go ahead; `done(item, result)` is called as each finishes."""

    def __init__(self, concurrency: int, per_host: int, backlog: int | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.per_host = max(1, per_host)
        self.backlog = backlog or max(1000, 20 * self.concurrency)

    async def run(
        self,
        items: Iterable[T],
        host: Callable[[T], str],
        work: Callable[[T], Awaitable[R]],
        done: Callable[[T, R], None],
    ) -> None:
        source: Iterator[T] = iter(items)
        exhausted = False
        active: dict[str, int] = {}
        waiting: dict[str, deque[T]] = {}
        runnable: dict[str, None] = {}  # hosts with waiting items and a free slot, in order
        queued = 0
        running: dict[asyncio.Future, tuple[T, str]] = {}
        # Finished tasks report here (asyncio.wait would re-register every running task each
        # time one finishes: quadratic in the concurrency).
        finished: deque[asyncio.Future] = deque()
        wake = asyncio.Event()

        def report(task: asyncio.Future) -> None:
            finished.append(task)
            wake.set()

        def start(item: T, name: str) -> None:
            active[name] = active.get(name, 0) + 1
            task = asyncio.ensure_future(work(item))
            task.add_done_callback(report)
            running[task] = (item, name)

        def offer(name: str) -> None:
            if waiting.get(name) and active.get(name, 0) < self.per_host:
                runnable.setdefault(name, None)

        try:
            while True:
                while runnable and len(running) < self.concurrency:
                    name = next(iter(runnable))
                    del runnable[name]
                    start(waiting[name].popleft(), name)
                    queued -= 1
                    if not waiting[name]:
                        del waiting[name]
                    offer(name)
                while not exhausted and queued + len(running) < self.backlog:
                    item = next(source, None)
                    if item is None:
                        exhausted = True
                        break
                    name = host(item)
                    if len(running) < self.concurrency and active.get(name, 0) < self.per_host:
                        start(item, name)
                    else:
                        waiting.setdefault(name, deque()).append(item)
                        queued += 1
                        offer(name)
                if not running:
                    if exhausted and not queued:
                        return
                    continue  # only waiting items: the first loop starts them
                await wake.wait()
                wake.clear()
                while finished:
                    task = finished.popleft()
                    item, name = running.pop(task)
                    active[name] -= 1
                    if not active[name]:
                        del active[name]
                    offer(name)
                    done(item, task.result())
        finally:
            for task in running:
                task.cancel()
            for task in running:
                with contextlib.suppress(BaseException):
                    await task
