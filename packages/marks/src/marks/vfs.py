"""The shell's virtual filesystem: a pure mapping from a path to what it holds.

`resolve(cwd, path)` needs no database and no clock beyond the one it is given: it turns a path
into a `Location` -- which bookmarks the directory holds (a `Selection`: a WHERE clause, its
bindings, an order and a limit) and how its subdirectories are listed (a `Subdirs`). Executing
them is `listing.py`'s job. The routes:

  /                          the top-level directories, each with a count
  /bookmarks[/ID]            every bookmark (ID: one bookmark)
  /tags[/a/b...]             tags nest on `/`; a directory lists its subtags and its bookmarks
  /starred /archived /unread /popular /broken /untagged /pdfs /queue
  /domains[/HOST]            bookmarks by host
  /recent[/ID]               visited bookmarks, most recent first
  /recent/PERIOD/ACTIVITY    PERIOD: today yesterday this-week last-week this-month last-month;
                             ACTIVITY: visited added starred (weeks start on Monday, UTC)
  /by-date/FIELD/YYYY/MM/DD  FIELD: added or visited
A trailing number in a collection names a bookmark in it (`/starred/12`).
"""

import datetime as dt
import posixpath

import msgspec

from marks import limits, tagnames
from marks.exceptions import NotFound

TOP = (
    "bookmarks",
    "tags",
    "starred",
    "archived",
    "recent",
    "domains",
    "unread",
    "popular",
    "broken",
    "untagged",
    "pdfs",
    "queue",
    "by-date",
)
PERIODS = ("today", "yesterday", "this-week", "last-week", "this-month", "last-month")
ACTIVITIES = ("visited", "added", "starred")
DATE_FIELDS = {"added": "added", "visited": "last_visited"}
POPULAR_SIZE = limits.POPULAR
NEWEST = "added DESC, id DESC"


class PathError(NotFound):
    """No such path; the message is the one line to show."""


# Frozen msgspec Structs rather than frozen dataclasses or named tuples: each dataclass costs a
# command's start-up about 4 million instructions (generated methods, `inspect`), a named tuple
# 0.7 million (its `__new__` compiled from source), a Struct 0.2 million.
class Selection(msgspec.Struct, frozen=True):
    """Bookmarks a directory holds: `SELECT ... FROM bookmarks WHERE {where} ORDER BY ...`."""

    where: str
    bindings: tuple = ()
    order: str = NEWEST
    limit: int | None = None
    # The bookmarks NOT selected, when they are the fewer: the directory's count is then every
    # bookmark (SQLite counts a table without reading its rows) less these. Exact, so it must be
    # the whole complement of `where` over every row the table can hold.
    others: str = ""
    # A statement answering the directory's count from numbers the schema keeps (schema 14:
    # `visit_counts`), when there is one: read instead of counting.
    kept: str = ""


class Subdirs(msgspec.Struct, frozen=True):
    """How to list a directory's subdirectories: `kind` with its arguments."""

    kind: str  # static, tags, domains, dates, periods
    args: tuple = ()


class Location(msgspec.Struct, frozen=True):
    """What a path is: its bookmarks, its subdirectories, or one bookmark."""

    path: str
    selection: Selection | None = None
    subdirs: Subdirs | None = None
    bookmark_id: int | None = None  # set when the path is one bookmark
    within: Selection | None = None  # the collection that bookmark must belong to
    tag: str | None = None  # set under /tags (the tag this directory stands for)
    subtree: Selection | None = None  # everything below (find, grep); default: `selection`

    @property
    def below(self) -> Selection | None:
        """What `find` and `grep` search: the directory and everything under it."""
        return self.subtree or self.selection

    @property
    def is_bookmark(self) -> bool:
        return self.bookmark_id is not None


COLLECTIONS = {
    "bookmarks": Selection("1"),
    "starred": Selection("starred = 1"),
    "archived": Selection("archived = 1"),
    # Two thirds of a library: counting the visited third is 4 times less work (visit_count is
    # NOT NULL and never negative: the schema checks it).
    "unread": Selection(
        "visit_count = 0",
        others="visit_count > 0",
        kept="SELECT (SELECT count(*) FROM bookmarks) - visited FROM visit_counts",
    ),
    "popular": Selection("visit_count > 0", order="visit_count DESC, id DESC", limit=POPULAR_SIZE),
    "broken": Selection("reachable = 0"),
    "untagged": Selection("tags = ''"),
    "pdfs": Selection("url LIKE '%.pdf'"),
    "queue": Selection(
        "id IN (SELECT bookmark_id FROM reading_queue WHERE completed_at IS NULL)",
        order="(SELECT priority FROM reading_queue WHERE bookmark_id = id), "
        "(SELECT -progress FROM reading_queue WHERE bookmark_id = id), "
        "(SELECT queued_at FROM reading_queue WHERE bookmark_id = id), id",  # queue.NEXT_ORDER
    ),
}


def normalise(cwd: str, path: str) -> str:
    """Absolute, without `.`, `..` or repeated slashes (`..` stops at the root)."""
    joined = path if path.startswith("/") else f"{cwd.rstrip('/')}/{path}"
    parts: list[str] = []
    for part in joined.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return "/" + "/".join(parts)


def _bookmark(path: str, segment: str, within: Selection | None) -> Location:
    if not segment.isdigit():
        raise PathError(f"no such directory: {path}")
    return Location(path, bookmark_id=int(segment), within=within)


def _between(column: str, prefix: str, order: str | None = None) -> Selection:
    """Times that start with `prefix`, as a range the column's index can answer."""
    return Selection(
        f"{column} >= ? AND {column} < ?",
        (prefix, prefix + "~"),
        order or f"{column} DESC, id DESC",
    )


def period_range(period: str, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of a period in UTC; weeks start on Monday; open periods end at `now`."""
    now = now.astimezone(dt.UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = midnight - dt.timedelta(days=midnight.weekday())
    first = midnight.replace(day=1)
    previous_first = (first - dt.timedelta(days=1)).replace(day=1)
    ranges = {
        "today": (midnight, now),
        "yesterday": (midnight - dt.timedelta(days=1), midnight),
        "this-week": (monday, now),
        "last-week": (monday - dt.timedelta(days=7), monday),
        "this-month": (first, now),
        "last-month": (previous_first, first),
    }
    start, end = ranges[period]
    if end == now:
        end = now + dt.timedelta(seconds=1)  # `now` itself is inside "today"
    return start, end


def _text(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def activity(
    name: str, start: dt.datetime | None = None, end: dt.datetime | None = None
) -> Selection:
    """Bookmarks by activity, newest first: visited uses last_visited; added and starred use
    `added` (there is no starred-at time), within [start, end) when given."""
    column = "last_visited" if name == "visited" else "added"
    bindings: tuple[str, ...] = ()
    kept = ""
    if start is None or end is None:
        where = f"{column} IS NOT NULL"
        if name == "visited":  # /recent, kept counted (schema 14)
            kept = "SELECT seen FROM visit_counts"
    else:
        where, bindings = f"{column} >= ? AND {column} < ?", (_text(start), _text(end))
    if name == "starred":
        where += " AND starred = 1"
    return Selection(where, bindings, order=f"{column} DESC, id DESC", kept=kept)


def _recent(path: str, parts: list[str], now: dt.datetime) -> Location:
    if len(parts) == 1:
        return Location(path, activity("visited"), Subdirs("static", PERIODS))
    period = parts[1]
    if period not in PERIODS:
        if len(parts) == 2:  # /recent/<id> opens a bookmark directly
            return _bookmark(path, period, Selection("1"))
        raise PathError(f"no such directory: {path}")
    if len(parts) == 2:
        return Location(path, None, Subdirs("static", ACTIVITIES))
    if parts[2] not in ACTIVITIES:
        raise PathError(f"no such directory: {path} (activities: {', '.join(ACTIVITIES)})")
    location = Location(path, activity(parts[2], *period_range(period, now)))
    if len(parts) == 3:
        return location
    if len(parts) == 4:
        return _bookmark(path, parts[3], location.selection)
    raise PathError(f"no such directory: {path}")


def _by_date(path: str, parts: list[str]) -> Location:
    if len(parts) == 1:
        return Location(path, None, Subdirs("static", tuple(DATE_FIELDS)))
    field = DATE_FIELDS.get(parts[1])
    dates = parts[2:]
    if field is None or len(dates) > 4:
        raise PathError(f"no such directory: {path}")
    if not dates:
        return Location(
            path, None, Subdirs("dates", (field, "")), subtree=Selection(f"{field} IS NOT NULL")
        )
    day = dates[:3]
    if not all(s.isdigit() and len(s) == w for s, w in zip(day, (4, 2, 2), strict=False)):
        raise PathError(f"no such directory: {path} (use YYYY/MM/DD)")
    try:  # a real calendar date (or month)
        dt.date(int(day[0]), int(day[1]) if len(day) > 1 else 1, int(day[2]) if len(day) > 2 else 1)
    except (ValueError, IndexError):
        raise PathError(f"no such date: {path}") from None
    prefix = "-".join(day)
    if len(dates) == 4:
        return _bookmark(path, dates[3], _between(field, prefix + "T"))
    if len(dates) == 3:  # a day holds bookmarks
        return Location(path, _between(field, prefix + "T"))
    return Location(path, None, Subdirs("dates", (field, prefix)), subtree=_between(field, prefix))


def resolve(cwd: str, path: str, now: dt.datetime) -> Location:
    """Where `path` (absolute or relative to `cwd`) leads, or PathError."""
    absolute = normalise(cwd, path)
    parts = absolute.strip("/").split("/") if absolute != "/" else []
    if not parts:
        return Location("/", None, Subdirs("static", TOP), subtree=Selection("1"))
    top = parts[0]
    if top in COLLECTIONS:
        if len(parts) == 1:
            return Location(absolute, COLLECTIONS[top])
        if len(parts) == 2:
            return _bookmark(absolute, parts[1], COLLECTIONS[top])
        raise PathError(f"no such directory: {absolute}")
    if top == "tags":
        if len(parts) == 1:
            return Location(absolute, None, Subdirs("tags", ("",)), subtree=Selection("tags != ''"))
        from marks import search  # (with the query language: only tag paths need it)

        name = "/".join(parts[1:])
        # The directory for tag `a/b` holds bookmarks with exactly that tag; its subtags are
        # directories. A numeric last part may instead be a bookmark: listing.py decides.
        return Location(
            absolute,
            Selection(search.exact_tag_clause(), (tagnames.key(name),)),
            Subdirs("tags", (name,)),
            tag=name,
            subtree=Selection(search.tag_clause(), tuple(search.tag_bindings(name))),
        )
    if top == "domains":
        if len(parts) == 1:
            return Location(absolute, None, Subdirs("domains"), subtree=Selection("1"))
        host = Selection("domain = ?", (parts[1].lower().removeprefix("www."),))
        if len(parts) == 2:
            return Location(absolute, host)
        if len(parts) == 3:
            return _bookmark(absolute, parts[2], host)
        raise PathError(f"no such directory: {absolute}")
    if top == "recent":
        return _recent(absolute, parts, now)
    if top == "by-date":
        return _by_date(absolute, parts)
    raise PathError(f"no such directory: {absolute}")


def parent(path: str) -> str:
    return posixpath.dirname(path.rstrip("/")) or "/"
