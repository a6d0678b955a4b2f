"""CSV: export writes our columns; import maps the columns other producers write.

marks writes one CSV format wherever it writes bookmarks as CSV (`export csv`, `-o csv`): every
field of a bookmark, the id first, booleans `true`/`false`, times in ISO 8601 UTC, tags joined by
commas. A cell that starts with `=`, `+`, `-`, `@`, tab or CR would be read as a formula by a
spreadsheet (`=HYPERLINK(...)`), so it is written with a leading `'` as OWASP advises (CSV
injection); a cell that starts with one or more `'` before such a character gets one more, so the
guard is always told from a person's own apostrophe, and marks' import removes exactly one.

Import recognises a header by its column names (marks, Pocket, Instapaper, Raindrop, and common
spellings), sniffs `,`, `;`, tab or `|` as the delimiter, and takes a file without a header row
when a cell of its first row is a URL (the URL column is then the one holding URLs).
"""

import csv
import io
from collections.abc import Iterable, Iterator
from typing import TextIO

from marks import clock
from marks.formats import FormatError, Record, dates
from marks.wire import Bookmark

COLUMNS = ["id", *Bookmark.__struct_fields__[1:]]  # the id first, then every field
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may start a formula with
_GUARDED = "'=+-@\t\r"  # the first characters of a cell that may need the guard
ALIASES = {
    "url": ("url", "href", "link", "uri", "address"),
    "title": ("title", "name"),
    "description": (
        "description",
        "desc",
        "notes",
        "note",
        "selection",
        "excerpt",
        "extended",
        "comment",
    ),
    "tags": ("tags", "tag", "labels", "keywords"),
    "folder": ("folder", "folders", "collection"),
    "starred": ("starred", "stars", "favorite", "favourite", "important"),
    "archived": ("archived", "is_archived"),
    "status": ("status", "state"),
    "added": (
        "added",
        "created",
        "created_at",
        "date_added",
        "add_date",
        "time_added",
        "timestamp",
        "time",
        "date",
        "saved_at",
    ),
    "last_visited": ("last_visited", "last_visit", "visited"),
    "visit_count": ("visit_count", "visits"),
    # marks' own columns: the latest link check travels too
    "reachable": ("reachable",),
    "last_checked": ("last_checked",),
    "check_result": ("check_result",),
    "archived_url": ("archived_url",),
    "archived_at": ("archived_at",),
}
TRUE = {"1", "true", "yes", "y", "x", "*"}
# Folder names that are states, not tags: Instapaper's and Raindrop's own folders.
FOLDER_FLAGS = {
    "unread": {},
    "starred": {"starred": True},
    "archive": {"archived": True},
    "archived": {"archived": True},
    "unsorted": {},
}


def guard(cell: str) -> str:
    """The cell as written: with a leading `'` if a spreadsheet could take it for a formula."""
    if cell and cell[0] in _GUARDED and cell.lstrip("'").startswith(FORMULA):
        return "'" + cell
    return cell


def unguard(cell: str) -> str:
    """The cell `guard` was given (for what marks wrote; other producers' cells pass as they are
    unless they look exactly like a guarded cell)."""
    if cell.startswith("'") and cell.lstrip("'").startswith(FORMULA):
        return cell[1:]
    return cell


def _flag(value: bool | None) -> str:
    return "" if value is None else "true" if value else "false"


def cells(b: Bookmark) -> list[object]:
    """A bookmark's row, in the order of COLUMNS."""
    return [
        b.id,
        b.url,
        guard(b.title),
        guard(b.description),
        guard(",".join(b.tags)),
        _flag(b.starred),
        _flag(b.archived),
        clock.to_text(b.added) or "",
        clock.to_text(b.last_visited) or "",
        b.visit_count,
        _flag(b.reachable),
        clock.to_text(b.last_checked) or "",
        guard(b.check_result or ""),
        guard(b.archived_url or ""),
        clock.to_text(b.archived_at) or "",
    ]


class Writer:
    """`csv.writer` with `\n` line ends that also quotes a row holding a bare CR. The csv module
    quotes only a cell with the delimiter, a quote or a character of the line terminator, so with
    `\n` it wrote `a\rb` bare, and every reader took the CR for the end of the row: the whole
    file was refused on import. Such a row is written with every cell quoted (always valid CSV)."""

    def __init__(self, out: TextIO) -> None:
        self.minimal = csv.writer(out, lineterminator="\n")
        self.quoted = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, row: Iterable[object]) -> None:
        cells = list(row)
        if any(isinstance(cell, str) and "\r" in cell for cell in cells):
            self.quoted.writerow(cells)
        else:
            self.minimal.writerow(cells)


def write(bookmarks: Iterable[Bookmark], out: TextIO) -> int:
    writer = Writer(out)
    writer.writerow(COLUMNS)
    count = 0
    for b in bookmarks:
        writer.writerow(cells(b))
        count += 1
    return count


def _looks_like_url(cell: str) -> bool:
    cell = cell.strip().lower()
    return "://" in cell[:12] or cell.startswith(("mailto:", "www."))


def _delimiter(sample: str) -> str:
    """The separator of the first row: `,` unless `;`, tab or `|` is more frequent there (the
    quoting stays RFC 4180's: csv.Sniffer guesses quote characters wrong on real files)."""
    first = sample.split("\n", 1)[0]
    counts = {sep: first.count(sep) for sep in (",", ";", "\t", "|")}
    best = max(counts, key=lambda sep: counts[sep])
    return best if counts[best] > counts[","] else ","


def read(stream: TextIO) -> Iterator[Record]:
    sample = stream.read(16384)
    sample += stream.readline()  # end on a line boundary
    rest = stream
    text = io.StringIO(sample)
    reader = csv.reader(_chain(text, rest), delimiter=_delimiter(sample))
    try:
        first = next(reader)
    except StopIteration:
        return
    except csv.Error as error:
        raise FormatError(f"not valid CSV: {error}") from None
    names = [name.strip().lstrip("\ufeff").lower().replace(" ", "_") for name in first]
    columns: dict[str, int] = {}
    for field, aliases in ALIASES.items():
        for alias in aliases:
            if alias in names:
                columns[field] = names.index(alias)
                break
    # Raindrop writes both `note` and `excerpt`: the first that is filled describes the bookmark.
    descriptions = [names.index(alias) for alias in ALIASES["description"] if alias in names]
    rows: Iterable[list[str]] = reader
    if "url" not in columns:
        found = [index for index, cell in enumerate(first) if _looks_like_url(cell)]
        if not found:
            shown = ", ".join(first)[:120]
            raise FormatError(f"no URL column in the header and no URL in the first row ({shown})")
        columns = {"url": found[0]}  # no header: one URL per row, maybe with other cells
        descriptions = []
        rows = _prepend(first, reader)
        start = 1
    else:
        start = 2
    pocket = "time_added" in names  # Pocket separates tags with `|`

    def cell(row: list[str], field: str) -> str:
        index = columns.get(field)
        return unguard(row[index].strip()) if index is not None and index < len(row) else ""

    line = start - 1
    try:
        for row in rows:
            line = reader.line_num
            if not any(value.strip() for value in row):
                continue
            notes: list[str] = []
            raw_tags = cell(row, "tags")
            tags = [tag for tag in raw_tags.split("|" if pocket else ",") if tag.strip()]
            flags: dict[str, bool] = {}
            folder = cell(row, "folder")
            if folder:
                if folder.casefold() in FOLDER_FLAGS:
                    flags = FOLDER_FLAGS[folder.casefold()]
                else:
                    tags.append(folder)
            status = cell(row, "status").lower()
            visits = cell(row, "visit_count")
            added = dates.parse_into(cell(row, "added"), notes, "date")
            yield Record(
                url=cell(row, "url"),
                title=cell(row, "title"),
                description=_description(row, descriptions),
                tags=tags,
                starred=cell(row, "starred").lower() in TRUE or flags.get("starred", False),
                archived=cell(row, "archived").lower() in TRUE
                or status in ("archive", "archived")
                or flags.get("archived", False),
                added=added,
                last_visited=dates.parse_into(cell(row, "last_visited"), notes, "last_visited"),
                visit_count=int(visits) if visits.isdigit() else 0,
                reachable=_maybe(cell(row, "reachable")),
                last_checked=dates.parse_into(cell(row, "last_checked"), notes, "last_checked"),
                check_result=cell(row, "check_result") or None,
                archived_url=cell(row, "archived_url") or None,
                archived_at=dates.parse_into(cell(row, "archived_at"), notes, "archived_at"),
                where=f"line {line}",
                notes=notes,
                undated=added is None,
            )
    except csv.Error as error:
        raise FormatError(f"not valid CSV (line {reader.line_num}): {error}") from None


def _description(row: list[str], columns: list[int]) -> str:
    """The first description cell that is filled (Raindrop writes both `note` and `excerpt`)."""
    found = (row[i].strip() for i in columns if i < len(row) and row[i].strip())
    return unguard(next(found, ""))


def _maybe(value: str) -> bool | None:
    return None if not value else value.lower() in TRUE


def _chain(first: TextIO, rest: TextIO) -> Iterator[str]:
    yield from first
    yield from rest


def _prepend(row: list[str], rows: Iterator[list[str]]) -> Iterator[list[str]]:
    yield row
    yield from rows
