"""Importing records into the library: streamed in batches inside one transaction.

Memory stays flat whatever the file's size: records are checked as the reader yields them
(`importchecks.Checker`, which needs no database, so the CLI runs it in the reader process) and
written a batch at a time (one `executemany` per table); which pages exist is asked of the
database per batch. Every entry is accounted for in the report: added, merged (`--update`, or the
same page twice in one file), skipped (already bookmarked), invalid, or repaired; `--verbose`
lists each with where it is in the file. With `strict`, any invalid or repaired entry refuses the
whole file. The index triggers are off during the load (see `bulk_load`).

Nothing grows with the number of entries: the lines `--verbose` lists go to a callback as they
come (a `ProblemLog` spools them to a temporary file), the rows merged into are listed in
temporary tables, and the caches of tags seen are bounded.
"""

import contextlib
import datetime as dt
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, TYPE_CHECKING

import msgspec

from marks import clock, journal, schema
from marks.importchecks import FINE, INVALID, Checker, Entry, describe, short
from marks.wire import Bookmark, ImportReport

if TYPE_CHECKING:
    from marks.library import Library
    from marks.store import Store

BATCH = 2000
REBUILD_BELOW = 20_000  # libraries smaller than this get their indexes rebuilt after an import
_LOOKUP = 500  # url_keys per `IN (...)` lookup
# Tag ids by name, bounded higher: a miss costs two statements, and a lifetime's library has tens
# of thousands of tags (a folder is a tag), so a cache of 2,048 was emptied every few batches and
# looked up 300,000 tags again at a million bookmarks. 65,536 names and ids take a few MB.
TAG_IDS = 65_536
# Temporary tables (the connection's own, dropped at the end): the rows this import merged into,
# whose tag text is refreshed at the end, and the library's rows it took out of the full-text
# indexes to do so. Sets of ids here would grow with every duplicate in the file.
MERGED = "marks_import_merged"
UNINDEXED = "marks_import_unindexed"
_encode = msgspec.json.Encoder().encode

# The report's lines: each at most LINE characters (a line quotes the entry's URL and title);
# at most SHOWN of them go into a report's `problems` (the JSON report, an HTTP answer), the
# rest counted in `problems_omitted` (the CLI's --verbose writes them all to a file).
LINE = 1000
SHOWN = 1000


class ProblemLog:
    """The lines `--verbose` lists, written as they come to a temporary file (in memory up to
    1 MiB, then on disk) and read back once the import is done: a file whose million entries are
    all skipped costs disk, not memory. Call it with a line; iterate it for the lines."""

    def __init__(self) -> None:
        # The log owns its file for its life: `close()` (or `with`) ends both.
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=1 << 20)  # noqa: SIM115
        self.count = 0

    def __call__(self, line: str) -> None:
        # One JSON string per line: a title's own line breaks come back as they were.
        self._file.write(_encode(short(line, LINE)) + b"\n")
        self.count += 1

    def __iter__(self) -> Iterator[str]:
        self._file.seek(0)
        for raw in self._file:
            yield msgspec.json.decode(raw, type=str)

    def first(self, count: int = SHOWN) -> Iterator[str]:
        """The first `count` lines (what a report holds; `count - shown` are omitted)."""
        for number, line in enumerate(self):
            if number >= count:
                return
            yield line

    def save(self, path: str) -> None:
        """Every line, one per line of text, into a new file readable by its owner only."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "w", encoding="utf-8") as out:
            for line in self:
                out.write(line.replace("\n", "\\n") + "\n")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "ProblemLog":
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def report_json(report: ImportReport, problems: Iterable[str]) -> Iterator[bytes]:
    """The report as `msgspec.json.encode(report)` writes it, its `problems` taken from
    `problems` (a ProblemLog's `first()`) line by line: in chunks of about 64 KiB, never all at
    once."""
    parts: list[bytes] = [b"{"]
    size = 0
    for index, name in enumerate(report.__struct_fields__):
        parts.append((b"," if index else b"") + _encode(name) + b":")
        if name != "problems":
            parts.append(_encode(getattr(report, name)))
            continue
        parts.append(b"[")
        for number, line in enumerate(problems):
            part = (b"," if number else b"") + _encode(line)
            parts.append(part)
            size += len(part)
            if size >= 1 << 16:
                yield b"".join(parts)
                parts, size = [], 0
        parts.append(b"]")
    parts.append(b"}")
    yield b"".join(parts)


class Importer:
    def __init__(
        self,
        library: "Library",
        report: ImportReport,
        update: bool,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.library = library
        self.store = library.store
        self.report = report
        self.update = update
        self.log = log if log is not None else self._keep
        self.refusal: str | None = None  # the first invalid or repaired entry (for --strict)
        self.checker = Checker()  # for the records it checks itself, and for merged tag lists
        self.tag_ids: dict[str, int] = {}  # by exact spelling, before the library's own cache
        self.first_new = journal.next_id(self.store)  # past the trash's ids too
        self.next_id = self.first_new
        # The full-text indexes this import keeps: none without FTS5 (see `marks.store`).
        self.indexes = INDEXES if self.store.full_text() else {}

    def _keep(self, line: str) -> None:
        """Without a log, the report holds the first SHOWN lines and counts the rest."""
        if len(self.report.problems) < SHOWN:
            self.report.problems.append(short(line, LINE))
        else:
            self.report.problems_omitted += 1

    def problem(self, where: str, text: str, *, refuses: bool = False) -> None:
        """A line for --verbose; `refuses`: the entry is invalid or repaired (--strict says no)."""
        line = f"{where}: {text}" if where else text
        self.log(line)
        if refuses and self.refusal is None:
            self.refusal = line

    def accept(self, entry: Entry) -> bool:
        """Count and log what the checks found; whether the entry is to be written."""
        if entry.outcome == FINE:
            return True
        if entry.outcome == INVALID:
            self.report.invalid += 1
        else:
            self.report.repaired += 1
        self.problem(entry.where, entry.problem, refuses=True)
        return entry.outcome != INVALID

    # --- writing a batch ----------------------------------------------------------------------

    def _existing(self, keys: list[str]) -> dict[str, tuple[int, bool]]:
        """The library's bookmark for each key, and whether this import took it out of the
        full-text indexes already (it merged an earlier entry of the file into it)."""
        found: dict[str, tuple[int, bool]] = {}
        for start in range(0, len(keys), _LOOKUP):
            chunk = keys[start : start + _LOOKUP]
            marks = ",".join("?" * len(chunk))
            for key, bookmark_id, unindexed in self.store.execute(
                f"SELECT b.url_key, b.id, u.id IS NOT NULL FROM bookmarks b "
                f"LEFT JOIN temp.{UNINDEXED} u ON u.id = b.id WHERE b.url_key IN ({marks})",
                chunk,
            ):
                found[key] = (bookmark_id, bool(unindexed))
        return found

    def write(self, batch: list[Entry]) -> None:
        if not batch:
            return
        existing = self._existing(list({entry.key for entry in batch}))
        fresh: dict[str, Entry] = {}
        unindexed: set[int] = set()  # the library's rows merged into within this batch
        for entry in batch:
            found = existing.get(entry.key)
            if found is None:
                first = fresh.get(entry.key)
                if first is None:
                    fresh[entry.key] = entry
                    continue
                _fold(first, entry)
                first.tags = self.checker.clean_tags([*first.tags, *entry.tags], [])
                self.report.skipped += 1
                self.problem(
                    entry.where,
                    f"same page as {first.where}, merged into one bookmark: {describe(entry)}",
                )
                continue
            known, earlier = found
            if known >= self.first_new or earlier or known in unindexed:  # earlier in this file
                self.merge(known, entry)
                self.report.skipped += 1
                self.problem(
                    entry.where,
                    f"same page as an earlier entry, merged into one bookmark: {describe(entry)}",
                )
            elif self.update:
                self.unindex(known)
                unindexed.add(known)
                self.merge(known, entry)
                self.report.updated += 1
                self.problem(entry.where, f"merged into bookmark {known}: {describe(entry)}")
            else:
                self.report.skipped += 1
                self.problem(entry.where, f"skipped (already bookmarked as {known}): {entry.url}")
        self.insert(list(fresh.values()))
        if len(self.tag_ids) >= TAG_IDS:  # a file with ever new tags: ids are looked up again
            self.tag_ids.clear()
            self.library._tag_ids.clear()

    def unindex(self, bookmark_id: int) -> None:
        """A bookmark of the library out of the indexes before it changes; `bulk_load` puts it
        back with the new rows at the end."""
        for index, (source, columns) in self.indexes.items():
            self.store.execute(
                f"INSERT INTO {index} ({index}, rowid, {columns}) "
                f"SELECT 'delete', id, {columns} FROM {source} WHERE id = ?",
                (bookmark_id,),
            )
        self.store.execute(f"INSERT INTO temp.{UNINDEXED} (id) VALUES (?)", (bookmark_id,))

    def merge(self, bookmark_id: int, entry: Entry) -> None:
        self.library.merge_into(bookmark_id, entry.bookmark(), entry.tags)
        self.store.execute(f"INSERT OR IGNORE INTO temp.{MERGED} (id) VALUES (?)", (bookmark_id,))

    def insert(self, entries: list[Entry]) -> None:
        now = clock.to_text(self.library.now())
        rows = []
        links = []
        tag_ids = self.tag_ids
        bookmark_id = self.next_id
        self.next_id += len(entries)
        for entry in entries:
            added = entry.added
            if added is None:
                self.report.undated += 1
                self.problem(entry.where, f"no date, import time used: {describe(entry)}")
                added_text = now
            elif added.tzinfo is _UTC and added.year >= 1000:  # what readers make: _text inline
                added_text = added.isoformat(timespec="seconds")[:19] + "Z"
            else:
                added_text = clock.to_text(added)
            rows.append(
                (
                    bookmark_id,
                    entry.url,
                    entry.key,
                    entry.title.strip(),
                    entry.description.strip(),
                    "\n".join(entry.tags),
                    entry.domain,
                    int(entry.starred),
                    int(entry.archived),
                    added_text,
                    None if entry.last_visited is None else _text(entry.last_visited),
                    max(0, entry.visit_count),
                    None if entry.reachable is None else int(entry.reachable),
                    None if entry.last_checked is None else clock.to_text(entry.last_checked),
                    entry.check_result,
                    entry.archived_url,
                    None if entry.archived_at is None else _text(entry.archived_at),
                )
            )
            for tag in entry.tags:
                found = tag_ids.get(tag)
                if found is None:
                    found = tag_ids[tag] = self.library._tag_id(tag)
                links.append((bookmark_id, found))
            bookmark_id += 1
        self.report.added += len(rows)
        self.store.db.executemany(
            "INSERT INTO bookmarks (id, url, url_key, title, description, tags, domain, starred, "
            "archived, added, last_visited, visit_count, reachable, last_checked, check_result, "
            "archived_url, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        self.store.db.executemany(
            "INSERT OR IGNORE INTO bookmark_tags (bookmark_id, tag_id) VALUES (?, ?)", links
        )


_UTC = dt.UTC


def _text(moment: dt.datetime | None) -> str | None:
    """clock.to_text, faster for the UTC times readers make (isoformat is C, strftime is not)."""
    if moment is None:
        return None
    if moment.tzinfo is not dt.UTC:
        return clock.to_text(moment)
    return (
        moment.isoformat(timespec="seconds")[:19] + "Z"
        if moment.year >= 1000
        else clock.to_text(moment)
    )


def _fold(first: Entry, again: Entry) -> None:
    """The same page twice in one file: one bookmark with the earliest date, the most visits."""
    a, b = first, again
    a.added = min(filter(None, (a.added, b.added)), default=None)
    a.last_visited = max(filter(None, (a.last_visited, b.last_visited)), default=None)
    a.visit_count = max(a.visit_count, b.visit_count)
    a.title = a.title or b.title
    a.description = a.description or b.description
    a.starred = a.starred or b.starred
    a.archived = a.archived or b.archived


# The full-text indexes an import fills itself (schema 3 and 5): index -> (the rows it indexes,
# its columns). The stemmed index reads page text through its content view; the prefix index
# (unstemmed words) covers the bookmark's own fields.
INDEXES = {
    "bookmarks_fts": ("bookmarks_fts_source", "title, description, url, tags, page_text"),
    "bookmarks_words": ("bookmarks", "title, description, url, tags"),
}
# The per-row triggers that would do the same one row at a time: off during the load.
INDEX_TRIGGERS = (
    "bookmarks_fts_insert",
    "bookmarks_fts_update",
    "bookmarks_words_insert",
    "bookmarks_words_update",
    "bookmark_tags_added",
)


# The terms a full-text index holds in memory while an import fills it (FTS5's `hashsize`, 1 MiB
# unless set): each time they fill it they go to disk as a new segment, which merges then rewrite.
# Larger for the fill only: fewer, larger segments, less merging. Filling both indexes at a
# million: 6.7 s of CPU with 1 MiB, 5.85 with 2, 5.8 with 4, 5.4 with 8; the step's RSS 17, 20,
# 24 and 34 MB. 8 MiB took the import's peak to 56 MB (the target is 60): 2 MiB.
FILL_HASHSIZE = 2 << 20
HASHSIZE = 1 << 20  # FTS5's own


@contextlib.contextmanager
def _hashsize(store: "Store", index: str, size: int) -> Iterator[None]:
    """`index`'s hashsize for the block, then as it was. FTS5 keeps the setting in the index's
    `_config` table, for every later write: the row is taken out again (inside the import's
    transaction, so a failed import leaves it as it was too) unless the library had one."""
    kept = store.value(f"SELECT v FROM {index}_config WHERE k = 'hashsize'")
    store.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('hashsize', ?)", (size,))
    yield
    store.execute(
        f"INSERT INTO {index} ({index}, rank) VALUES ('hashsize', ?)",
        (HASHSIZE if kept is None else kept,),
    )
    if kept is None:  # this connection's index now has FTS5's own again, as others will read it
        store.execute(f"DELETE FROM {index}_config WHERE k = 'hashsize'")


@contextlib.contextmanager
def bulk_load(importer: Importer) -> Iterator[None]:
    """Within an import's transaction: insert rows without per-row index triggers, then index
    the new and merged rows in one statement (ten times faster at 100,000 bookmarks).

    The triggers are dropped and re-created inside the same transaction (SQLite's DDL is
    transactional), so a failure or crash restores them with everything else. Without FTS5 the
    index's triggers are not there (see `marks.store`) and there is no index to fill.
    """
    store = importer.store
    present = {
        name for (name,) in store.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")
    }
    dropped = [("TRIGGER", name) for name in INDEX_TRIGGERS if name in present]
    # The kept counts' triggers too (a row each, a third of a million of them for the visited
    # alone): the counts are counted afresh at the end instead.
    dropped += [("TRIGGER", name) for name in schema.KEPT_COUNTS_TRIGGERS if name in present]
    if importer.first_new <= REBUILD_BELOW:
        # A small library: its secondary indexes are built once at the end (sorted) rather than
        # grown row by row at random places; url_key's UNIQUE index stays, lookups need it.
        dropped += [
            ("INDEX", name)
            for (name,) in store.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN "
                "('bookmarks', 'bookmark_tags') AND sql IS NOT NULL"
            )
        ]
    saved = [
        store.value("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)) for _, name in dropped
    ]
    for kind, name in dropped:
        store.execute(f'DROP {kind} "{name}"')
    for table in (MERGED, UNINDEXED):  # rolled back with the transaction if the import fails
        store.execute(f"DROP TABLE IF EXISTS temp.{table}")
        store.execute(f"CREATE TEMP TABLE {table} (id INTEGER PRIMARY KEY)")
    yield
    # The merged rows' tag text follows the join table, as the trigger would have kept it.
    store.execute(
        "UPDATE bookmarks SET tags = (SELECT coalesce(group_concat(name, char(10)), '') "
        "FROM (SELECT t.name FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id "
        "WHERE bt.bookmark_id = bookmarks.id ORDER BY t.name)) "
        f"WHERE id IN (SELECT id FROM temp.{MERGED})"
    )
    for index, (source, columns) in importer.indexes.items():
        with _hashsize(store, index, FILL_HASHSIZE):
            store.execute(
                f"INSERT INTO {index} (rowid, {columns}) "
                f"SELECT id, {columns} FROM {source} WHERE id >= ?",
                (importer.first_new,),
            )
            store.execute(
                f"INSERT INTO {index} (rowid, {columns}) "
                f"SELECT id, {columns} FROM {source} WHERE id IN (SELECT id FROM temp.{UNINDEXED})"
            )
    for table in (MERGED, UNINDEXED):
        store.execute(f"DROP TABLE temp.{table}")
    for sql in saved:
        store.execute(sql)
    store.execute(schema.RECOUNT)


def import_records(
    library: "Library",
    records: Iterable[Bookmark],
    *,
    update: bool = False,
    strict: bool = False,
    progress: Callable[[int], None] = lambda _: None,
    problems: Callable[[str], None] | None = None,
) -> ImportReport:
    """`problems` takes each line --verbose lists as it comes (a ProblemLog, or one that drops
    them); without it they are kept in the report's `problems`."""
    return import_entries(
        library,
        Checker().entries(records),
        update=update,
        strict=strict,
        progress=progress,
        problems=problems,
    )


def import_entries(
    library: "Library",
    entries: Iterable[Entry],
    *,
    update: bool = False,
    strict: bool = False,
    progress: Callable[[int], None] = lambda _: None,
    problems: Callable[[str], None] | None = None,
) -> ImportReport:
    """`import_records` of records already checked, in their file's order (`Checker.entries`,
    which may run in another process)."""
    report = ImportReport(problems=[], warnings=[])
    with library.store.transaction():
        importer = Importer(library, report, update, problems)
        with bulk_load(importer):
            batch: list[Entry] = []
            accept = importer.accept
            for number, entry in enumerate(entries, 1):
                if entry.outcome == FINE or accept(entry):
                    batch.append(entry)
                    if len(batch) >= BATCH:
                        importer.write(batch)
                        batch = []
                if number % 64 == 0:
                    progress(number)
            importer.write(batch)
        if strict and (report.invalid or report.repaired):
            from marks.library import Invalid

            raise Invalid(
                f"--strict: {report.invalid} invalid and {report.repaired} repaired entries, "
                f"nothing imported (first: {importer.refusal or ''})"
            )
    return report
