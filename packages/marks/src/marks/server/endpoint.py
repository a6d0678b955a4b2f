"""How a route is declared once and then run, checked and documented from that declaration.

A `routes_*` module lists `Endpoint`s: method, path, query `Param`s, the body Struct, the
response types and a plain function `handler(library, call)` that only calls the service layer.
`run()` turns a request into that call -- parameters checked, the body decoded by msgspec, the
handler run in a worker thread with that thread's database connection -- and every domain error
into the JSON error body. `openapi.py` reads the same declarations, so the document cannot drift
from what the server does.
"""

import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import apsw
import msgspec
from starlette.requests import Request
from starlette.responses import Response

from marks import health
from marks.exceptions import Conflict, NotAllowed
from marks.filters import FilterError
from marks.formats import FormatError
from marks.library import Duplicate, Invalid, Library, MarksError, NotFound
from marks.plugins import Context, Plugins
from marks.queue import AlreadyQueued
from marks.server.background import Busy
from marks.server.graph_builds import GraphBuilds
from marks.server.health_checks import HealthChecks
from marks.server.settings import ServerSettings
from marks.store import Store, StoreError
from servekit import HTTPError, JSONResponse

MAX_ID = 2**63 - 1


class ErrorOut(msgspec.Struct, omit_defaults=True):
    """Every error: a short phrase, one line of details, and the existing id on a 409."""

    error: str
    details: str | None = None
    existing_id: int | None = None


@dataclass(frozen=True)
class Param:
    name: str
    kind: type = str  # str, int or bool
    default: Any = None
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    required: bool = False


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # Starlette syntax: /bookmarks/{id:int}
    summary: str
    handler: Callable[..., Any]
    params: tuple[Param, ...] = ()
    body: Any = None  # a msgspec type, decoded from JSON
    status: int = 200
    # A type, a tuple of types (any of), {media type: type} (str: text), or None for no body.
    response: Any = None
    errors: tuple[int, ...] = ()  # besides 400/401/403/413 which any route may answer
    raw: bool = False  # the handler is `async (request, libraries, settings)` and answers itself
    # Path parameters that take one of a few words ({"format": ("json", "html")}): documented as
    # an enum; the handler still answers 404 for any other word, as for an unknown id.
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)


@dataclass
class Call:
    """What a handler receives besides the library: checked parameters and the decoded body."""

    query: dict[str, Any]
    path: dict[str, Any]
    body: Any = None
    settings: ServerSettings | None = None
    libraries: "Libraries | None" = None  # the server's shared services (plugins, checks)

    @property
    def server(self) -> "Libraries":
        assert self.libraries is not None, "set by make_handler"
        return self.libraries


class Libraries:
    """One SQLite connection per worker thread (APSW connections are not shared between
    threads here, and WAL lets readers run beside a writer); a fresh `Library` per request,
    so no cache outlives a request while the CLI changes the same file (the tag counts and the
    stats are kept only until the file changes: `marks.kept`).

    One `Plugins` for the server's life (config `plugins` says which run), so API writes fire
    `on_bookmark_added` & co. as the CLI's do; a failing plugin is reported to the server log and
    disabled until the server restarts."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._local = threading.local()
        self.plugins = Plugins(enabled=settings.config.get("plugins") or {}, report=_log)
        self._plugins_started = False
        self._checks: HealthChecks | None = None
        self._checks_lock = threading.Lock()
        self.graph_builds = GraphBuilds(self.open_library)

    def start_plugins(self) -> None:
        """Load the plugins (and run their `on_load`) before worker threads share them."""
        if not self._plugins_started:
            self._plugins_started = True
            context = Context(library=Library(self.store()), config=self.settings.config)
            self.plugins.start(context)
            self.plugins.load()

    def stop_plugins(self) -> None:
        if self._plugins_started:
            self.plugins.close()

    def store(self) -> Store:
        store = getattr(self._local, "store", None)
        if store is None:
            store = Store(self.settings.db)
            store.db.setbusytimeout(self.settings.busy_timeout_ms)
            self._local.store = store
        return store

    def library(self) -> Library:
        days = self.settings.config.get("trash_days", 30)
        return Library(self.store(), plugins=self.plugins, trash_days=days)

    def open_library(self) -> Library:
        """A library on a connection of its own, for a background thread (closed by it)."""
        store = Store(self.settings.db)
        store.db.setbusytimeout(self.settings.busy_timeout_ms)
        return Library(store)

    def health_options(self) -> health.Options:
        return health.options_from_config(self.settings.config)

    def health_checks(self) -> HealthChecks:
        with self._checks_lock:
            if self._checks is None:
                from marks.settings import Config

                config = self.settings.config
                self._checks = HealthChecks(
                    self.open_library,
                    self.health_options(),
                    wayback_api=config.get("wayback_api", Config().wayback_api)
                    if config.get("health_wayback")
                    else None,
                )
            return self._checks


def _log(message: str) -> None:
    print(f"marks: {message}", file=sys.stderr, flush=True)


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def parse_params(params: tuple[Param, ...], request: Request) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for param in params:
        text = request.query_params.get(param.name)
        if text is None:
            if param.required:
                raise HTTPError(400, "Bad request", f"missing query parameter {param.name!r}")
            values[param.name] = param.default
            continue
        try:
            if param.kind is bool:
                value: Any = _flag(text)
            elif param.kind is int:
                if not text.lstrip("-").isdigit() or not text.isascii():  # int() takes any digits
                    raise ValueError(f"expected a whole number, not {text!r}")
                value = int(text)
            else:
                value = text
        except ValueError as error:
            raise HTTPError(400, "Bad request", f"{param.name}: {error}") from None
        if param.minimum is not None and value < param.minimum:
            raise HTTPError(400, "Bad request", f"{param.name} must be at least {param.minimum}")
        if param.maximum is not None and value > param.maximum:
            raise HTTPError(400, "Bad request", f"{param.name} must be at most {param.maximum}")
        if param.choices and value not in param.choices:
            raise HTTPError(
                400, "Bad request", f"{param.name} must be one of {', '.join(param.choices)}"
            )
        if param.kind is str and "\x00" in value:
            raise HTTPError(400, "Bad request", f"{param.name} contains a NUL character")
        values[param.name] = value
    return values


def domain_error(error: Exception) -> HTTPError:
    """The one place where service errors become HTTP statuses."""
    message = (str(error) or type(error).__name__).splitlines()[0]
    if isinstance(error, Duplicate):
        return HTTPError(409, "Duplicate", message, existing_id=error.existing_id)
    if isinstance(error, AlreadyQueued):
        return HTTPError(409, "Already queued", message)
    if isinstance(error, Conflict):  # the CLI's one-line error (exit 1) for the same state
        return HTTPError(409, "Conflict", message)
    if isinstance(error, NotFound):
        return HTTPError(404, "Not found", message)
    if isinstance(error, NotAllowed):
        return HTTPError(403, "Forbidden", message)
    if isinstance(error, Busy):
        return HTTPError(429, "Too many requests", message, headers={"Retry-After": "5"})
    if isinstance(error, FilterError):
        return HTTPError(400, "Bad query", message)
    if isinstance(error, Invalid | FormatError):
        return HTTPError(422, "Invalid", message)
    if isinstance(error, StoreError | apsw.BusyError):
        return HTTPError(503, "Database busy", message, headers={"Retry-After": "1"})
    return HTTPError(422, "Invalid", message)


EXPECTED = (MarksError, FilterError, FormatError, StoreError, apsw.BusyError)


# A few database threads, not anyio's forty: queries are short and hold the GIL between SQLite
# calls, so more threads only add switching (measured: more throughput with 20 connections).
DB_THREADS = 4
_limiter: anyio.CapacityLimiter | None = None


async def in_thread(libraries: Libraries, function: Callable[[Library], Any]) -> Any:
    global _limiter
    if _limiter is None:  # created inside the running event loop
        _limiter = anyio.CapacityLimiter(DB_THREADS)

    def work() -> Any:
        try:
            return function(libraries.library())
        except EXPECTED as error:
            raise domain_error(error) from None
        except OverflowError:  # a number SQLite cannot hold names nothing that exists
            raise HTTPError(422, "Invalid", "a number is out of range") from None

    return await anyio.to_thread.run_sync(work, limiter=_limiter)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 past `limit` (the security layer also stops a stream that
    lies about its length)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise HTTPError(413, "Payload too large", f"the body is limited to {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, "Payload too large", f"the body is limited to {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode(body: bytes, kind: Any) -> Any:
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as error:
        raise HTTPError(422, "Invalid", str(error)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as error:  # msgspec: bad UTF-8 is the latter
        raise HTTPError(400, "Bad request", f"the body is not JSON: {error}") from None
    except RecursionError:  # deeper than the decoder follows: no bookmark is shaped like that
        raise HTTPError(422, "Invalid", "the body is nested too deeply") from None


def make_handler(
    endpoint: Endpoint, libraries: Libraries, settings: ServerSettings
) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        for _name, value in request.path_params.items():
            if isinstance(value, int) and value > MAX_ID:
                raise HTTPError(404, "Not found", f"nothing has id {value}")
        if endpoint.raw:
            return await endpoint.handler(request, libraries, settings)
        call = Call(parse_params(endpoint.params, request), dict(request.path_params))
        call.settings = settings
        call.libraries = libraries
        if endpoint.body is not None:
            call.body = decode(await read_body(request, settings.json_limit), endpoint.body)
        result = await in_thread(libraries, lambda library: endpoint.handler(library, call))
        if isinstance(result, Response):
            return result
        if endpoint.response is None:
            return Response(status_code=endpoint.status)
        return JSONResponse(result, status_code=endpoint.status)

    return handle
