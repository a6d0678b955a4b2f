"""Reading a browser's SQLite database while the browser may be running.

A running browser holds its database open in WAL mode: recent rows live only in the `-wal` file,
and opening the original could write to it (checkpoints, the `-shm` index). So the database is
copied with its `-wal` and `-shm` files into a temporary directory and the copy is opened
read-only: every committed row is seen and the browser's files are only ever read.
"""

import contextlib
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import apsw

from marks.browsers import BrowserError


@contextlib.contextmanager
def opened(path: Path, tables: Mapping[str, Iterable[str]]) -> Iterator[apsw.Connection]:
    """A read-only connection to a private copy of `path`, whose schema has `tables` (each with
    the columns listed); otherwise BrowserError naming the file."""
    if not path.is_file():
        raise BrowserError(f"{path}: no such file")
    with tempfile.TemporaryDirectory(prefix="marks-browser-") as directory:
        copy = Path(directory) / path.name
        try:
            shutil.copyfile(path, copy)
            for suffix in ("-wal", "-shm"):
                companion = path.with_name(path.name + suffix)
                if companion.is_file():
                    shutil.copyfile(companion, copy.with_name(copy.name + suffix))
        except OSError as error:
            raise BrowserError(f"{path}: cannot copy ({error.strerror})") from None
        try:
            db = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error as error:
            raise BrowserError(f"{path}: cannot open ({error})") from None
        try:
            _check(db, path, tables)
            yield db
        finally:
            db.close()


def _check(db: apsw.Connection, path: Path, tables: Mapping[str, Iterable[str]]) -> None:
    try:
        version = db.pragma("user_version")
        for table, columns in tables.items():
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if not have:
                raise BrowserError(f"{path}: unknown schema (version {version}): no table {table}")
            missing = ", ".join(f"{table}.{c}" for c in columns if c not in have)
            if missing:
                raise BrowserError(f"{path}: unknown schema (version {version}): no {missing}")
    except apsw.Error as error:
        raise BrowserError(f"{path}: not a readable SQLite database ({error})") from None


def rows(
    db: apsw.Connection, path: Path, sql: str, bindings: "apsw.Bindings" = ()
) -> Iterator[tuple[Any, ...]]:
    """Rows of a query; a corrupt page part-way through is a BrowserError naming the file."""
    try:
        yield from db.execute(sql, bindings)
    except apsw.Error as error:
        raise BrowserError(f"{path}: cannot read ({error})") from None
