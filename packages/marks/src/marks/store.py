"""The SQLite file: opening it (WAL, foreign keys, busy timeout), migrating it, transactions.

Only the service layer uses this module; nothing above it runs SQL.

The full-text index needs SQLite's FTS5 module, which a SQLite may lack (a distribution's build,
a Python linked to a system library). Without it the index is left alone, never half-kept: a new
file gets none, and a file that has one loses the triggers that keep it in sync (a write would
fail in them: the module is missing), while its tables wait. A SQLite with FTS5 sees the
triggers missing and builds the index again from the bookmarks, so it is never stale.
"""

import contextlib
import os
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import apsw

from marks import paths, schema
from marks.exceptions import MarksError

if TYPE_CHECKING:
    from pathlib import Path


# The functions below are registered on every connection but called only by migrations and
# snapshots: their modules load on the first call, not with every short command.
def _url_key(*values: Any) -> str:
    from marks import urls

    return urls.key(str(values[0]))


class StoreError(MarksError):
    """The database cannot be used (locked, corrupt, newer than this program)."""


class NoFullText(MarksError):
    """The full-text index was asked for on a SQLite without FTS5."""


NO_FTS5 = "this SQLite has no FTS5"


def _has_fts5(db: apsw.Connection) -> bool:
    # The modules this connection has now: FTS5 may be compiled in and still dropped.
    return bool(db.execute("SELECT 1 FROM pragma_module_list WHERE name = 'fts5'").fetchone())


def _sha256(*values: "apsw.SQLiteValue") -> "apsw.SQLiteValue":
    import hashlib

    (data,) = values
    return hashlib.sha256(data).hexdigest() if isinstance(data, bytes) else None


def _inflate(*values: "apsw.SQLiteValue") -> "apsw.SQLiteValue":
    (data,) = values
    return zlib.decompress(data) if isinstance(data, bytes) else None


def _casefold(*values: "apsw.SQLiteValue") -> "apsw.SQLiteValue":
    (text,) = values  # registered with one argument
    return text.casefold() if isinstance(text, str) else text


def _create_private(path: str) -> None:
    """A new library file is created readable by its owner only (0600, like the config): it
    holds every bookmark and note. SQLite gives its -wal and -shm files the same mode. A file
    that exists keeps the mode its owner gave it."""
    if path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class Store:
    def __init__(self, path: "Path | str") -> None:
        self.path = str(path)
        self.notices: list[str] = []  # what opening the file changed that a person should know
        if self.path != ":memory:" and not paths.is_dir(directory := paths.parent(self.path)):
            # A typo in --db must not leave directories and an empty database behind.
            raise StoreError(f"cannot open {self.path}: directory {directory} does not exist")
        _create_private(self.path)
        try:
            self.db = apsw.Connection(self.path)
            self.db.setbusytimeout(5000)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: commits stay atomic
            # Tag keys (schema 4) are Unicode case folds, which SQLite's NOCASE (ASCII) is not.
            self.db.create_scalar_function("casefold", _casefold, 1, deterministic=True)
            # Migrations that recompute url_key call the same normalisation as the library.
            self.db.create_scalar_function("marks_url_key", _url_key, 1, deterministic=True)
            # Migration 9 moves page originals into the blob store, keyed by their SHA-256.
            self.db.create_scalar_function("marks_sha256", _sha256, 1, deterministic=True)
            self.db.create_scalar_function("marks_inflate", _inflate, 1, deterministic=True)
            self.has_fts = _has_fts5(self.db)  # whether this connection can keep the index
            self._migrate()
            self.full_text()  # built here when absent: a SQLite without FTS5 used the file
        except apsw.Error as error:
            raise StoreError(f"cannot open {self.path}: {error}") from None

    def _migrate(self) -> None:
        version = self.value("PRAGMA user_version")
        if version > schema.VERSION:
            raise StoreError(
                f"{self.path} was written by a newer marks (schema {version}); "
                f"this one knows up to {schema.VERSION}"
            )
        if not self.has_fts and self._full_text_triggers():
            # Before the migrations, whose writes would fire them: a write transaction without
            # FTS5 drops the index's triggers as it begins (see `transaction`).
            with self.transaction():
                pass
        if version == schema.VERSION:
            return
        # The index's own statements run only where the index is kept (a new file, or triggers
        # in place); otherwise `full_text()` builds it whole once the migrations are done.
        full_text = self.has_fts and (version == 0 or bool(self._full_text_triggers()))
        had_merges = self._has_table("tag_merges")
        with self.transaction():
            for step in schema.STEPS[version:]:
                self.db.execute(step.schema)
                if full_text and step.full_text:
                    self.db.execute(step.full_text)
            self.db.execute(f"PRAGMA user_version = {schema.VERSION}")
        if version:
            self._report_collisions()
        if not had_merges and version:  # tags that became one when tag keys were folded
            self.notices += [
                f"tag {name!r} merged into {kept!r} ({count} bookmark(s)): tags ignore case now"
                for name, kept, count in self.db.execute(
                    "SELECT name, kept, bookmarks FROM tag_merges"
                )
            ]

    # --- the full-text index ----------------------------------------------------------------------

    def full_text(self) -> bool:
        """Whether the full-text index can answer: FTS5 is here and the index is in sync. An
        index that is missing or lost its triggers (a SQLite without FTS5 wrote the file) is
        built first, from the bookmarks, so it never answers stale."""
        if not self.has_fts:
            return False
        if len(self._full_text_triggers()) < len(schema.FULL_TEXT_TRIGGERS):
            self._build_full_text()
        return True

    def require_full_text(self, what: str) -> None:
        if not self.full_text():
            raise NoFullText(f"{what}: {NO_FTS5}")

    def _full_text_triggers(self) -> set[str]:
        names = schema.FULL_TEXT_TRIGGERS
        return {
            name
            for (name,) in self.db.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'trigger' "
                f"AND name IN ({','.join('?' * len(names))})",
                names,
            )
        }

    def _suspend_full_text(self) -> None:
        """Without FTS5, inside a write transaction: drop the triggers that keep the index (a
        write would fail in them); their absence tells a SQLite with FTS5 to rebuild it."""
        found = self._full_text_triggers()
        if not found:
            return
        for name in sorted(found):
            self.db.execute(f'DROP TRIGGER "{name}"')
        self.notices.append(
            f"{NO_FTS5}: full-text search falls back to substring search; the full-text index "
            "is rebuilt when a SQLite with FTS5 opens this file"
        )

    def _build_full_text(self) -> None:
        """The index from scratch: whatever is left of it goes, then every migration's index
        statements run in order (their history is its one definition) and fill it."""
        with self.transaction():
            if len(self._full_text_triggers()) == len(schema.FULL_TEXT_TRIGGERS):
                return  # another connection built it meanwhile
            for name in schema.FULL_TEXT_TRIGGERS:
                self.db.execute(f'DROP TRIGGER IF EXISTS "{name}"')
            for table in schema.FULL_TEXT_TABLES:
                self.db.execute(f'DROP TABLE IF EXISTS "{table}"')
            for step in schema.STEPS:
                if step.full_text:
                    self.db.execute(step.full_text)
        count = self.value("SELECT count(*) FROM bookmarks")
        if count:
            self.notices.append(
                f"full-text index rebuilt ({count} bookmark(s)): a SQLite without FTS5 wrote "
                "this file"
            )

    # --- facts -----------------------------------------------------------------------------------

    def _has_table(self, name: str) -> bool:
        return bool(
            self.db.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (name,)).fetchone()
        )

    def _report_collisions(self) -> None:
        """Say so when recomputed URL keys made bookmarks the same page (all of them are kept)."""
        if not self._has_table("url_key_collisions"):
            return
        count = self.value("SELECT count(*) FROM url_key_collisions")
        if count:
            message = (
                f"{count} bookmark(s) are now the same page as an older one (URL keys were "
                "normalised); all are kept: `marks db dedupe` merges them"
            )
            self.notices.append(message)  # every front end shows its notices once

    @contextlib.contextmanager
    def transaction(self) -> Iterator[apsw.Connection]:
        """All or nothing: the block's writes commit together, or none of them do."""
        if self.db.in_transaction:  # nested: part of the outer command's transaction
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if not self.has_fts:  # every time: a SQLite with FTS5 may have rebuilt it since
                self._suspend_full_text()
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def execute(self, sql: str, bindings: "apsw.Bindings" = ()) -> apsw.Cursor:
        return self.db.execute(sql, bindings)

    def one(self, sql: str, bindings: "apsw.Bindings" = ()) -> tuple[Any, ...] | None:
        """The first row (columns typed by the query, hence Any), or None."""
        return self.db.execute(sql, bindings).fetchone()

    def value(self, sql: str, bindings: "apsw.Bindings" = ()) -> Any:
        """The first column of the first row, or None (typed by the query, hence Any)."""
        row = self.db.execute(sql, bindings).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self.db.close()

    @property
    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(self.path + suffix)
        return total
