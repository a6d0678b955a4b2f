"""The Starlette application: every `routes_*` module's endpoints, the web UI, the guards."""

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from marks.server import (
    openapi,
    routes_bookmarks,
    routes_browsers,
    routes_content,
    routes_graph,
    routes_health,
    routes_library,
    routes_plugins,
    routes_queue,
    routes_snapshots,
    routes_tags,
    routes_transfer,
    routes_trash,
)
from marks.server.accesslog import AccessLog
from marks.server.endpoint import Endpoint, Libraries, make_handler
from marks.server.security import Guard
from marks.server.settings import ServerSettings
from servekit import CorsPolicy, JSONResponse, exception_handlers

STATIC = Path(__file__).with_name("static")
# One module per resource. A capability that lands (health, queue, content, graph, browsers)
# adds its `routes_<name>.py` here, and its web view as `static/views/<name>.js`.
MODULES = (
    routes_bookmarks,
    routes_browsers,
    routes_content,
    routes_graph,
    routes_health,
    routes_library,
    routes_plugins,
    routes_queue,
    routes_snapshots,
    routes_tags,
    routes_transfer,
    routes_trash,
)


def endpoints() -> list[Endpoint]:
    found = [endpoint for module in MODULES for endpoint in module.ENDPOINTS]
    # Fixed paths first, so /bookmarks/lookup is never read as /bookmarks/{id}.
    return sorted(found, key=lambda e: "{" in e.path)


def make_app(settings: ServerSettings) -> Starlette:
    libraries = Libraries(settings)
    libraries.store()  # open (and migrate) now: a bad database fails at start, not per request
    libraries.start_plugins()
    declared = endpoints()
    document = openapi.build(declared)
    routes: list[BaseRoute] = [
        Route(e.path, make_handler(e, libraries, settings), methods=[e.method]) for e in declared
    ]

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(document)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    routes += [
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/", index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        libraries.stop_plugins()  # plugins' on_unload

    cors = CorsPolicy.only(*settings.origins, allow_extensions=True)
    # The access log outermost: it sees every answer, the guard's refusals too.
    logged = [Middleware(AccessLog)] if settings.access_log else []
    app = Starlette(
        routes=routes,
        exception_handlers=exception_handlers(),
        # CORS outside the guard, so its refusals still carry its headers and a client reads them.
        middleware=[*logged, cors.middleware(), Middleware(Guard, settings=settings)],
        lifespan=lifespan,
    )
    app.state.libraries = libraries
    return app
