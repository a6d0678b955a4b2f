"""`/bookmarks/health`: batch link checks in the background, their progress, each link's history.

The checks run through `marks.health`, the service behind `marks bookmark health`; see
`health_checks.py` for the background runs (one at a time, 429 while one runs).
"""

from typing import Annotated

import msgspec

from marks import health
from marks.filters import compile_filter
from marks.library import Library, NotFound
from marks.server.endpoint import MAX_ID, Call, Endpoint, Param
from marks.server.health_checks import CheckProgress
from marks.wire import HealthCheck

MAX_IDS = 10_000
BookmarkId = Annotated[int, msgspec.Meta(ge=0, le=MAX_ID)]


class HealthRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Which links: `ids`, a `query` (the `bookmark query` language), both (their intersection),
    or neither (every link not checked within health_max_age_hours, as the CLI does)."""

    ids: Annotated[list[BookmarkId], msgspec.Meta(max_length=MAX_IDS)] = []
    query: str | None = None
    force: bool = False  # also re-check links checked less than health_max_age_hours ago


class HealthOverview(msgspec.Struct, kw_only=True):
    """The library's link health now: what the web UI's Health view shows."""

    checked: int
    unchecked: int
    broken: int  # unreachable on their latest check
    confirmed: int  # of those, failed on checks health_confirm_hours apart
    unconfirmed: int
    running: str | None = None  # the id of the batch check running now


def overview(library: Library, call: Call) -> HealthOverview:
    store = library.store
    row = store.one(
        "SELECT count(reachable), count(*) - count(reachable), "
        "coalesce(sum(reachable = 0), 0) FROM bookmarks"
    )
    assert row is not None  # an aggregate always has its row
    checked, unchecked, broken = row
    confirmed = health.Health(library, call.server.health_options()).confirmed_broken()
    return HealthOverview(
        checked=checked,
        unchecked=unchecked,
        broken=broken,
        confirmed=confirmed,
        unconfirmed=broken - confirmed,
        running=call.server.health_checks().running,
    )


def start(library: Library, call: Call) -> CheckProgress:
    body: HealthRequest = call.body
    ids = tuple(dict.fromkeys(body.ids))
    for bookmark_id in ids:  # 404 now, rather than a failed check later
        library.get(bookmark_id)
    where, bindings = compile_filter(body.query) if body.query else ("", [])
    selection = health.Selection(ids=ids, where=where, bindings=tuple(bindings), force=body.force)
    return call.server.health_checks().start(selection)


def progress(library: Library, call: Call) -> CheckProgress:
    found = call.server.health_checks().get(call.path["check_id"])
    if found is None:
        raise NotFound(
            f"no check {call.path['check_id'][:40]!r} (finished checks are kept a while)"
        )
    return found


def history(library: Library, call: Call) -> list[HealthCheck]:
    checker = health.Health(library, call.server.health_options())
    return checker.history(call.path["id"], call.query["limit"])


ENDPOINTS = [
    Endpoint("GET", "/bookmarks/health", "Link health now: checked, unchecked, broken",
             overview, response=HealthOverview),
    Endpoint("POST", "/bookmarks/health",
             "Start a batch link check (202 with its id; 429 while another runs)", start,
             body=HealthRequest, status=202, response=CheckProgress, errors=(404, 422, 429)),
    Endpoint("GET", "/bookmarks/health/{check_id}", "A batch check's progress and results",
             progress, response=CheckProgress, errors=(404,)),
    Endpoint("GET", "/bookmarks/{id:int}/health", "One bookmark's checks, newest first", history,
             (Param("limit", int, 20, "at most this many (1-1000)", 1, 1000),),
             response=list[HealthCheck], errors=(404,)),
]  # fmt: skip
