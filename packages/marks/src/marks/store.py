"""The SQLite file: opening it (WAL, foreign keys, busy timeout), migrating it, transactions.

Only the service layer uses this module; nothing above it runs SQL.
"""

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

from marks import schema, urls


def _url_key(*values: Any) -> str:
    return urls.key(str(values[0]))


class StoreError(RuntimeError):
    """The database cannot be used (locked, corrupt, newer than this program)."""


class Store:
    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = apsw.Connection(self.path)
            self.db.setbusytimeout(5000)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: commits stay atomic
            # Migrations that recompute url_key call the same normalisation as the library.
            self.db.create_scalar_function("marks_url_key", _url_key, 1, deterministic=True)
            self._migrate()
        except apsw.Error as error:
            raise StoreError(f"cannot open {self.path}: {error}") from None

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > schema.VERSION:
            raise StoreError(
                f"{self.path} was written by a newer marks (schema {version}); "
                f"this one knows up to {schema.VERSION}"
            )
        if version == schema.VERSION:
            return
        with self.transaction():
            for number in range(version, schema.VERSION):
                self.db.execute(schema.MIGRATIONS[number])
            self.db.execute(f"PRAGMA user_version = {schema.VERSION}")
        if version:
            self._report_collisions()

    def _report_collisions(self) -> None:
        """Say so when recomputed URL keys made bookmarks the same page (all of them are kept)."""
        exists = "SELECT 1 FROM sqlite_schema WHERE name = 'url_key_collisions'"
        if self.db.execute(exists).fetchone() is None:
            return
        count = self.value("SELECT count(*) FROM url_key_collisions")
        if count:
            logging.getLogger("marks").warning(
                "marks: %d bookmark(s) are now the same page as an older one (URL keys were "
                "normalised); all are kept: `marks db dedupe` merges them",
                count,
            )

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

    def execute(self, sql: str, bindings=()) -> apsw.Cursor:
        return self.db.execute(sql, bindings)

    def one(self, sql: str, bindings=()):
        row = self.db.execute(sql, bindings).fetchone()
        return row

    def value(self, sql: str, bindings=()):
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
