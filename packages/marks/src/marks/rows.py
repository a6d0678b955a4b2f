"""How a row of the `bookmarks` table becomes a `Bookmark` (one column order for every query)."""

from collections.abc import Sequence
from typing import Any

from marks import clock
from marks.wire import Bookmark

NAMES = (
    "id",
    "url",
    "title",
    "description",
    "tags",
    "starred",
    "archived",
    "added",
    "last_visited",
    "visit_count",
    "reachable",
    "last_checked",
    "check_result",
    "archived_url",
    "archived_at",
)
COLUMNS = ", ".join(NAMES)


def qualified(alias: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in NAMES)


def to_bookmark(row: Sequence[Any]) -> Bookmark:
    return Bookmark(
        id=row[0],
        url=row[1],
        title=row[2],
        description=row[3],
        tags=row[4].split("\n") if row[4] else [],
        starred=bool(row[5]),
        archived=bool(row[6]),
        added=clock.from_text(row[7]),
        last_visited=clock.from_text(row[8]),
        visit_count=row[9],
        reachable=None if row[10] is None else bool(row[10]),
        last_checked=clock.from_text(row[11]),
        check_result=row[12],
        archived_url=row[13],
        archived_at=clock.from_text(row[14]),
    )
