"""The SQLite file: opening it (WAL, foreign keys, busy timeout), migrating it, transactions.

Only the service layer uses this module; nothing above it runs SQL.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import apsw

from marks import schema


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
