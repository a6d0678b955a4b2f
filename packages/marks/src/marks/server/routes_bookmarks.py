"""`/bookmarks`: list, add, get, change, delete, visit, look up by URL, and tag in bulk."""

from typing import Annotated

import msgspec

from marks.filters import compile_filter
from marks.library import SORTS, Library, NotFound
from marks.server import routes_snapshots
from marks.server.endpoint import MAX_ID, Call, Endpoint, Param
from marks.wire import Bookmark

MAX_LIMIT = 1000
MAX_OFFSET = 2**53  # beyond any library; keeps SQLite's integers in range


class BookmarkIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    url: str
    title: str = ""
    description: str = ""
    tags: list[str] = []
    starred: bool = False
    archived: bool = False


class BookmarkPatch(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Only the fields sent change; an unknown field is refused (422), never ignored."""

    url: str | msgspec.UnsetType = msgspec.UNSET
    title: str | msgspec.UnsetType = msgspec.UNSET
    description: str | msgspec.UnsetType = msgspec.UNSET
    tags: list[str] | msgspec.UnsetType = msgspec.UNSET
    starred: bool | msgspec.UnsetType = msgspec.UNSET
    archived: bool | msgspec.UnsetType = msgspec.UNSET


class BookmarkPage(msgspec.Struct):
    items: list[Bookmark]
    limit: int
    offset: int
    has_more: bool


BookmarkId = Annotated[int, msgspec.Meta(ge=1, le=MAX_ID)]


class Retag(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    ids: list[BookmarkId]
    add: list[str] = []
    remove: list[str] = []


class Changed(msgspec.Struct):
    changed: int


LIST_PARAMS = (
    Param("limit", int, 50, "at most this many (1-1000)", 1, MAX_LIMIT),
    Param("offset", int, 0, "skip this many", 0, MAX_OFFSET),
    Param("sort", str, "added", "order", choices=tuple(SORTS)),
    Param("reverse", bool, False, "reverse the order"),
    Param("tag", str, None, "only this tag and its descendants"),
    Param("starred", bool, None, "only starred (true) or unstarred (false)"),
    Param("query", str, None, "a filter in the `bookmark query` language, e.g. `unread and tag:x`"),
)


def list_bookmarks(library: Library, call: Call) -> BookmarkPage:
    q = call.query
    where, bindings = compile_filter(q["query"]) if q["query"] else ("", [])
    found = library.list_bookmarks(
        sort=q["sort"],
        reverse=q["reverse"],
        limit=q["limit"] + 1,  # one more says whether there is a next page, without a count
        offset=q["offset"],
        tag=q["tag"] or None,
        starred=q["starred"],
        where=where,
        bindings=bindings,
    )
    return BookmarkPage(found[: q["limit"]], q["limit"], q["offset"], len(found) > q["limit"])


def add(library: Library, call: Call) -> Bookmark:
    body: BookmarkIn = call.body
    added = library.add(
        body.url,
        title=body.title,
        description=body.description,
        tags=body.tags,
        starred=body.starred,
        archived=body.archived,
    )
    routes_snapshots.take_later(call.server, added.id)  # config snapshot_on_add
    return added


def lookup(library: Library, call: Call) -> Bookmark:
    found = library.find_by_url(call.query["url"])
    if found is None:
        raise NotFound(f"not bookmarked: {call.query['url'][:200]}")
    return found


def get(library: Library, call: Call) -> Bookmark:
    return library.get(call.path["id"])


def patch(library: Library, call: Call) -> Bookmark:
    changes = msgspec.structs.asdict(call.body)
    changes = {name: value for name, value in changes.items() if value is not msgspec.UNSET}
    return library.update(call.path["id"], **changes)


def delete(library: Library, call: Call) -> None:
    library.delete([call.path["id"]])


def visit(library: Library, call: Call) -> Bookmark:
    return library.visit(call.path["id"])


def retag(library: Library, call: Call) -> Changed:
    body: Retag = call.body
    return Changed(library.retag(body.ids, add=body.add, remove=body.remove))


ONE = "/bookmarks/{id:int}"
ENDPOINTS = [
    Endpoint("GET", "/bookmarks", "List bookmarks (filters, sort, pages)", list_bookmarks,
             LIST_PARAMS, response=BookmarkPage),
    Endpoint("POST", "/bookmarks", "Add a bookmark (409 with existing_id if the URL is known)",
             add, body=BookmarkIn, status=201, response=Bookmark, errors=(409, 422)),
    Endpoint("GET", "/bookmarks/lookup", "The bookmark for a URL (normalised as on import)",
             lookup, (Param("url", str, None, "any spelling of the URL", required=True),),
             response=Bookmark, errors=(404,)),
    Endpoint("POST", "/bookmarks/tags", "Add and remove tags on many bookmarks at once",
             retag, body=Retag, response=Changed, errors=(404, 422)),
    Endpoint("GET", ONE, "One bookmark", get, response=Bookmark, errors=(404,)),
    Endpoint("PATCH", ONE, "Change known fields of a bookmark", patch, body=BookmarkPatch,
             response=Bookmark, errors=(404, 409, 422)),
    Endpoint("DELETE", ONE, "Move a bookmark to the trash (POST /undo brings it back)", delete,
             status=204, errors=(404,)),
    Endpoint("POST", ONE + "/visit", "Record a visit", visit, response=Bookmark, errors=(404,)),
]  # fmt: skip
