"""CSV with a header row: export writes our columns; import maps other tools' header names."""

import csv
import datetime as dt
from collections.abc import Iterable, Iterator
from typing import TextIO

from marks import clock
from marks.formats import FormatError
from marks.library import Record
from marks.wire import Bookmark

COLUMNS = [
    "url",
    "title",
    "description",
    "tags",
    "starred",
    "archived",
    "added",
    "last_visited",
    "visit_count",
]
ALIASES = {
    "url": ("url", "href", "link", "uri", "address"),
    "title": ("title", "name"),
    "description": ("description", "desc", "notes", "note", "excerpt", "extended", "comment"),
    "tags": ("tags", "tag", "labels", "keywords", "folder", "folders"),
    "starred": ("starred", "stars", "favorite", "favourite"),
    "archived": ("archived",),
    "added": ("added", "created", "created_at", "date_added", "add_date", "time", "date"),
    "last_visited": ("last_visited", "last_visit", "visited"),
    "visit_count": ("visit_count", "visits"),
}
TRUE = {"1", "true", "yes", "y", "x", "*"}


def write(bookmarks: Iterable[Bookmark], out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    count = 0
    for b in bookmarks:
        writer.writerow(
            [
                b.url,
                b.title,
                b.description,
                ",".join(b.tags),
                int(b.starred),
                int(b.archived),
                clock.to_text(b.added) or "",
                clock.to_text(b.last_visited) or "",
                b.visit_count,
            ]
        )
        count += 1
    return count


def _time(text: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        return clock.parse_user_date(text)
    except ValueError:
        return clock.from_epoch(text)


def read(stream: TextIO) -> Iterator[Record]:
    reader = csv.reader(stream)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as error:
        raise FormatError(f"not valid CSV: {error}") from None
    names = [name.strip().lower() for name in header]
    columns = {}
    for field, aliases in ALIASES.items():
        for alias in aliases:
            if alias in names:
                columns[field] = names.index(alias)
                break
    if "url" not in columns:
        raise FormatError(f"no URL column in the header ({', '.join(header)[:120]})")

    def cell(row: list[str], field: str) -> str:
        index = columns.get(field)
        return row[index].strip() if index is not None and index < len(row) else ""

    try:
        for row in reader:
            if not any(value.strip() for value in row):
                continue
            visits = cell(row, "visit_count")
            yield Record(
                url=cell(row, "url"),
                title=cell(row, "title"),
                description=cell(row, "description"),
                tags=[tag for tag in cell(row, "tags").split(",") if tag.strip()],
                starred=cell(row, "starred").lower() in TRUE,
                archived=cell(row, "archived").lower() in TRUE,
                added=_time(cell(row, "added")),
                last_visited=_time(cell(row, "last_visited")),
                visit_count=int(visits) if visits.isdigit() else 0,
            )
    except csv.Error as error:
        raise FormatError(f"not valid CSV (line {reader.line_num}): {error}") from None
