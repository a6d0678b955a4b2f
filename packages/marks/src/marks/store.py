"""The SQLite file: opening it (WAL, foreign keys, busy timeout), migrating it, transactions.

Only the service layer uses this module; nothing above it runs SQL.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

from marks import schema, urls
from marks.exceptions import MarksError


def _url_key(*values: Any) -> str:
    return urls.key(str(values[0]))


class StoreError(MarksError):
    """The database cannot be used (locked, corrupt, newer than this program)."""


def _casefold(*values: "apsw.SQLiteValue") -> "apsw.SQLiteValue":
    (text,) = values  # registered with one argument
    return text.casefold() if isinstance(text, str) else text


class Store:
    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.notices: list[str] = []  # what opening the file changed that a person should know
        if self.path != ":memory:" and not Path(self.path).parent.is_dir():
            # A typo in --db must not leave directories and an empty database behind.
            raise StoreError(
                f"cannot open {self.path}: directory {Path(self.path).parent} does not exist"
            )
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
            self._migrate()
        except apsw.Error as error:
            raise StoreError(f"cannot open {self.path}: {error}") from None

    def _migrate(self) -> None:
        version = self.value("PRAGMA user_version")
        if version > schema.VERSION:
            raise StoreError(
                f"{self.path} was written by a newer marks (schema {version}); "
                f"this one knows up to {schema.VERSION}"
            )
        if version == schema.VERSION:
            return
        had_merges = self._has_table("tag_merges")
        with self.transaction():
            for number in range(version, schema.VERSION):
                self.db.execute(schema.MIGRATIONS[number])
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
