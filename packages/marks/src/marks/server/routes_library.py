"""Reading the library as a whole: statistics, search, and the dates tree."""

from typing import Annotated, Literal

import msgspec

from marks import vfs
from marks.kept import kept
from marks.library import Library
from marks.listing import Filesystem
from marks.maintenance import stats as library_stats
from marks.server.endpoint import Call, Endpoint, Param
from marks.wire import Bookmark, SearchHit
from servekit import HTTPError


class Stats(msgspec.Struct):
    bookmarks: int
    starred: int
    archived: int
    unread: int
    untagged: int
    broken: int
    unchecked: int
    domains: int
    tags: int
    total_visits: int
    oldest: str | None
    newest: str | None


class SearchResult(msgspec.Struct):
    query: str
    fts: bool  # what was asked for
    hits: list[SearchHit]  # best first; with fts a snippet marks matches as [word]
    method: Annotated[
        Literal["fts", "substring"],
        msgspec.Meta(
            description="what ran: fts (ranked full text) or substring; substring although "
            "fts was asked for means this SQLite has no FTS5 (the same query, each word or "
            "phrase a substring, newest first, no snippets)"
        ),
    ]
    notice: Annotated[
        str | None, msgspec.Meta(description="why the search ran otherwise than asked, if it did")
    ]


class Period(msgspec.Struct):
    period: str  # 2024, 2024-05 or 2024-05-17
    count: int


class DatePage(msgspec.Struct):
    field: str
    granularity: str
    periods: list[Period]  # the periods inside the one asked for, newest first
    bookmarks: list[Bookmark]  # with `day`: that day's bookmarks, newest first


def stats(library: Library, call: Call) -> Stats:
    # Kept until the library changes: the web UI's sidebar asks on every visit.
    return kept(
        library.store, "stats", lambda store: msgspec.convert(library_stats(library), Stats)
    )


def search(library: Library, call: Call) -> SearchResult:
    q = call.query
    if not q["q"].strip():
        raise HTTPError(400, "Bad query", "empty search")
    hits = library.search(q["q"], fts=q["fts"], limit=q["limit"])
    method: Literal["fts", "substring"] = "fts" if hits.full_text else "substring"
    return SearchResult(q["q"], q["fts"], list(hits), method, hits.fallback)


GRANULARITIES = ("year", "month", "day")


def by_date(library: Library, call: Call) -> DatePage:
    q = call.query
    granularity = q["granularity"]
    parts = [f"{q['year']:04d}" if q["year"] is not None else None]
    parts += [f"{q[name]:02d}" if q[name] is not None else None for name in ("month", "day")]
    needed = {"year": 0, "month": 1, "day": 2}[granularity]  # parts above the level asked for
    if q["day"] is not None:
        needed = 3
    given = [part for part in parts[:needed] if part is not None]
    if len(given) < needed:
        missing = ("year", "month", "day")[parts[:needed].index(None)]
        raise HTTPError(400, "Bad request", f"granularity {granularity} needs {missing}")
    path = "/".join(["/by-date", q["field"], *given])
    filesystem = Filesystem(library)
    try:
        location = filesystem.locate("/", path)
    except vfs.PathError as error:
        raise HTTPError(400, "Bad request", str(error)) from None
    listing = filesystem.listing(location, counts=True)
    prefix = "-".join(given)
    periods = [
        Period(f"{prefix}-{e.name}" if prefix else e.name, e.count or 0)
        for e in listing.entries
        if e.is_dir
    ]
    bookmarks = [e.bookmark for e in listing.entries if e.bookmark is not None]
    return DatePage(q["field"], granularity, periods, bookmarks[: q["limit"]])


ENDPOINTS = [
    Endpoint("GET", "/stats", "Counts about the library", stats, response=Stats),
    Endpoint("GET", "/search", "Search: substring, or ranked full text with fts=1 (substring "
             "where this SQLite has no FTS5: `method` and `notice` say so)", search,
             (Param("q", str, None, "the query (with fts: words, prefix*, \"phrases\", AND/OR/NOT,"
                    " title:, url:, #tag)", required=True),
              Param("fts", bool, False, "ranked full-text search with snippets"),
              Param("limit", int, 50, "at most this many", 1, 1000)),
             response=SearchResult),
    Endpoint("GET", "/bookmarks/by-date", "Bookmarks by the date added or last visited", by_date,
             (Param("field", str, "added", "added or visited", choices=("added", "visited")),
              Param("granularity", str, "year", "the level listed", choices=GRANULARITIES),
              Param("year", int, None, "needed for month and day", 1, 9999),
              Param("month", int, None, "needed for day", 1, 12),
              Param("day", int, None, "lists that day's bookmarks", 1, 31),
              Param("limit", int, 200, "bookmarks at most", 1, 1000)),
             response=DatePage),
]  # fmt: skip
