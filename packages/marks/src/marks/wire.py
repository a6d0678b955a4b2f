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


BOOKMARK_FIELDS = tuple(Bookmark.__struct_fields__)
encode_json = msgspec.json.Encoder().encode
