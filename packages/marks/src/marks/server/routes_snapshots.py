"""`/bookmarks/{id}/snapshots` and `/snapshots/{sid}`: list, capture (from the extension), take
(fetched by marks), view and delete snapshots (`marks.snapshots`).

A snapshot is someone else's page: it is served so that nothing in it runs with marks' origin.
`Content-Security-Policy: sandbox` gives it a unique opaque origin with scripts, forms, popups and
top navigation off (a `<script>` that calls the API cannot run, and could not send the page's
cookies or read an answer if it did); `default-src 'none'` with `data:` images, styles and fonts
keeps it from loading anything from the network (a tracker in it stays silent); nosniff keeps it
HTML; only the web UI (same origin) may frame it. marks sets no cookies at all.
"""

import sys
import threading

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from marks.library import Invalid, Library
from marks.server.endpoint import Call, Endpoint, Libraries, decode, in_thread, read_body
from marks.server.settings import ServerSettings
from marks.snapshots.service import Snapshots
from marks.wire import Snapshot, SnapshotResult
from servekit import HTTPError, JSONResponse

VIEW_POLICY = (
    "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline' data:; "
    "font-src data:; media-src data:; frame-ancestors 'self'"
)
VIEW_HEADERS = {
    "Content-Security-Policy": VIEW_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-cache",
}


class SnapshotIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A page the extension serialised (styles and images inlined); without `html`, marks
    fetches the page itself."""

    html: str | None = None
    url: str = ""
    title: str = ""


def _service(library: Library, settings: ServerSettings | None) -> Snapshots:
    from marks.health import options_from_config

    config = settings.config if settings is not None else {}
    return Snapshots(library, options_from_config(config), config.get("snapshot_max_mb", 20))


def list_snapshots(library: Library, call: Call) -> list[Snapshot]:
    return _service(library, call.settings).list([call.path["id"]])


def view(library: Library, call: Call) -> Response:
    html = _service(library, call.settings).html(call.path["sid"])
    return Response(html, media_type="text/html; charset=utf-8", headers=VIEW_HEADERS)


def delete(library: Library, call: Call) -> None:
    _service(library, call.settings).delete([call.path["sid"]])


async def add(request: Request, libraries: Libraries, settings: ServerSettings) -> Response:
    bookmark_id = request.path_params["id"]
    body = decode(await read_body(request, settings.snapshot_limit), SnapshotIn)
    megabytes = float(settings.config.get("snapshot_max_mb", 20))
    if body.html is not None and len(body.html.encode("utf-8")) > megabytes * 1024 * 1024:
        raise HTTPError(413, "Payload too large", f"a snapshot is limited to {megabytes:g} MB")

    def run(library: Library) -> Snapshot:
        snapshots = _service(library, settings)
        if body.html is not None:
            return snapshots.capture(bookmark_id, body.html.encode("utf-8"), body.url, body.title)
        total, skipped = snapshots.plan([bookmark_id])
        if not total:
            raise Invalid(skipped[0].detail if skipped else "nothing to snapshot")
        results: list[SnapshotResult] = []
        snapshots.take(on_result=results.append)
        if results[0].snapshot is None:
            raise Invalid(f"no snapshot: {results[0].outcome}: {results[0].detail}")
        return results[0].snapshot

    return JSONResponse(await in_thread(libraries, run), status_code=201)


def take_later(libraries: Libraries, bookmark_id: int) -> None:
    """Config `snapshot_on_add` for bookmarks added through the API: the snapshot is taken in a
    thread of its own, on a connection of its own, so the add answers at once (a failure is only
    logged: the bookmark is kept either way)."""
    if not libraries.settings.config.get("snapshot_on_add"):
        return

    def run() -> None:
        library = libraries.open_library()
        try:
            snapshots = _service(library, libraries.settings)
            if snapshots.plan([bookmark_id])[0]:
                snapshots.take()
        except Exception as error:  # reported, never raised into a thread nobody joins
            print(f"marks serve: snapshot on add of {bookmark_id}: {error}", file=sys.stderr)
        finally:
            library.store.close()

    threading.Thread(target=run, name=f"snapshot-{bookmark_id}", daemon=True).start()


ONE = "/bookmarks/{id:int}/snapshots"
SID = "/snapshots/{sid:int}"
ENDPOINTS = [
    Endpoint("GET", ONE, "A bookmark's snapshots, newest first", list_snapshots,
             response=list[Snapshot], errors=(404,)),
    Endpoint("POST", ONE, "Keep a snapshot: the page the extension sends (html), capped at "
             "snapshot_max_mb and sanitised again, or, without html, fetched by marks now",
             add, body=SnapshotIn, status=201, response=Snapshot, raw=True,
             errors=(404, 413, 422)),
    Endpoint("GET", SID, "A snapshot's self-contained HTML, served sandboxed (CSP sandbox, "
             "nothing loads from the network)", view, response={"text/html": str},
             errors=(404,)),
    Endpoint("DELETE", SID, "Delete a snapshot", delete, status=204, errors=(404,)),
]  # fmt: skip
