"""What marks reads and writes: bookmarks and reports, as msgspec Structs (also the JSON format)."""

import datetime as dt

import msgspec


class Bookmark(msgspec.Struct, kw_only=True):
    """A bookmark as every front end and the JSON export see it."""

    id: int = 0
    url: str
    title: str = ""
    description: str = ""
    tags: list[str] = []
    starred: bool = False
    archived: bool = False
    added: dt.datetime | None = None
    last_visited: dt.datetime | None = None
    visit_count: int = 0
    reachable: bool | None = None
    last_checked: dt.datetime | None = None
    check_result: str | None = None


class ImportReport(msgspec.Struct):
    added: int = 0
    updated: int = 0
    skipped: int = 0
    invalid: int = 0
    repaired: int = 0  # kept after a repair (a bad field dropped, spaces encoded...)
    undated: int = 0  # entries whose file gave no readable date: the import time was used
    problems: list[str] = []  # one line per invalid, skipped, merged or repaired entry (--verbose)
    warnings: list[str] = []  # about the whole file (its charset), always shown


class TagCount(msgspec.Struct):
    name: str
    count: int  # bookmarks with this tag or a descendant
    direct: int  # bookmarks with exactly this tag


class TagUse(msgspec.Struct):
    tag: str
    bookmarks: int


class TagStats(msgspec.Struct):
    tags: int  # tags with bookmarks of their own
    tree_nodes: int  # tags plus the parents their names imply
    bookmarks: int
    untagged: int
    deepest: int
    most_used: list[TagUse]


class SearchHit(msgspec.Struct):
    bookmark: Bookmark
    score: float | None = None
    snippet: str | None = None


class QueueItem(msgspec.Struct, kw_only=True):
    """A reading-queue entry: the bookmark's id, url and title with its place in the queue."""

    id: int
    url: str
    title: str = ""
    priority: int = 3  # 1 (highest) .. 5
    progress: int = 0  # percent; 100 completes the item
    queued_at: dt.datetime | None = None
    completed_at: dt.datetime | None = None


class QueueStats(msgspec.Struct, kw_only=True):
    queued: int  # open items (not completed)
    in_progress: int  # open items with some progress
    completed: int
    by_priority: dict[int, int]  # open items per priority level
    oldest: QueueItem | None = None  # the open item queued first


BOOKMARK_FIELDS = tuple(Bookmark.__struct_fields__)
encode_json = msgspec.json.Encoder().encode


class HealthCheck(msgspec.Struct, kw_only=True):
    """One link check: what `bookmark health --output json` prints per URL, and a history row."""

    id: int  # the bookmark
    url: str
    result: (
        str  # ok redirect client_error server_error timeout ssl_error connection_error blocked dns
    )
    status: int | None = None
    reachable: bool
    final_url: str | None = None
    detail: str = ""
    elapsed_ms: int = 0
    attempts: int = 1
    checked_at: dt.datetime | None = None
    failing_since: dt.datetime | None = None  # first failure of the current run of failures
    confirmed: bool = False  # broken on checks at least `health_confirm_hours` apart


class PageContent(msgspec.Struct, kw_only=True):
    """What `content refresh` stored about a page (without the body)."""

    id: int  # the bookmark
    url: str
    outcome: str  # stored, unchanged, too_large, failed
    kind: str = ""  # html, pdf, text, other, too_large, error
    status: int | None = None
    content_type: str = ""
    size: int = 0
    words: int = 0
    title: str = ""
    detail: str = ""
    fetched_at: dt.datetime | None = None


# Snapshot and LeftOut hold only strings, numbers and times (no cycle can pass through them), so
# they are not tracked by the garbage collector: listing 10,000 snapshots then costs a quarter.
class LeftOut(msgspec.Struct, gc=False):
    """A resource a snapshot does not hold, and why (over the cap, could not be fetched...)."""

    url: str
    reason: str


class Snapshot(msgspec.Struct, kw_only=True, gc=False):
    """One stored snapshot of a bookmark's page (without its HTML: `GET /snapshots/{id}`)."""

    id: int
    bookmark_id: int
    taken_at: dt.datetime
    url: str
    source: str  # fetch (by marks) or browser (captured by the extension)
    size: int  # bytes of the self-contained HTML
    title: str = ""
    omitted: tuple[LeftOut, ...] = ()


class SnapshotResult(msgspec.Struct, kw_only=True):
    """What `snapshot take` did for one bookmark."""

    bookmark_id: int
    url: str
    outcome: str  # stored, failed, too_large, skipped
    snapshot: Snapshot | None = None
    detail: str = ""
