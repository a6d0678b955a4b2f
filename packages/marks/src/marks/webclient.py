"""The rules every web request of marks follows, shared by the health checker and page content.

One aiohttp session per command; a fixed, polite User-Agent; TLS verified against the system's trust
store; at most `per_host` requests at a time to one host and `concurrency` in all; a timeout per
request. `Scheduler` feeds work to the session from a stream without ever holding the whole stream:
at most `concurrency` tasks run and at most `backlog` items wait, whatever the number of URLs.
"""

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar
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


class SpecialUseResolver(AbstractResolver):
    """The system resolver, except for names RFC 6761 reserves as never resolving (`.invalid`):
    those fail at once as NXDOMAIN, without a query leaving the machine."""

    def __init__(self) -> None:
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.rstrip(".").lower()
        if name == "invalid" or name.endswith(".invalid"):
            raise OSError(socket.EAI_NONAME, f"{host} does not exist (RFC 6761 .invalid)")
        return await self._inner.resolve(host, port, family)

    async def close(self) -> None:
        await self._inner.close()


def tls_context() -> ssl.SSLContext:
    """Certificates checked against the system's trust store (OpenSSL's default paths)."""
    return ssl.create_default_context()


def session(settings: ClientSettings) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(
        limit=settings.concurrency,
        limit_per_host=settings.per_host,
        ssl=tls_context(),
        resolver=SpecialUseResolver(),
        ttl_dns_cache=300,
    )
    return aiohttp.ClientSession(
        connector=connector,
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
