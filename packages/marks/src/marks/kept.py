"""Values computed from a library file (the tag tree's counts, the server's stats), kept for the
process until the file changes, by whoever changes it.

Kept by file (device and inode: a library replaced by another file is another) with the `PRAGMA
data_version` of a connection of our own that never writes: it changes with every commit to the
file by any connection of any process. The asking connection's own `data_version` cannot serve:
its own commits leave it as it was. Kept per process, not per connection: the server's database
threads come and go (anyio ends a thread idle for 10 s, and its connection with it), so values
kept per connection were computed again on most visits.
"""

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from marks.store import Store

T = TypeVar("T")
File = tuple[int, int]

_lock = threading.Lock()
_WATCHED = 4  # files watched at once (a test run opens hundreds: the oldest watcher is closed)
_watchers: "OrderedDict[File, apsw.Connection]" = OrderedDict()
_by_file: dict[tuple[File, str], tuple[int, Any]] = {}
# A file without a path (`:memory:`): values kept per connection, by `data_version` (commits of
# other connections) and `total_changes` (rows this one wrote, triggers and cascades included).
_by_store: "weakref.WeakKeyDictionary[Store, dict[str, tuple[tuple[int, int], Any]]]" = (
    weakref.WeakKeyDictionary()
)


def kept(store: Store, name: str, compute: Callable[[Store], T]) -> T:
    """`compute(store)` as of the file's current state: computed again only after a change.
    The value is shared: do not modify it."""
    if store.db.in_transaction:  # changes not committed yet: computed for this caller only
        return compute(store)
    file = _file(store)
    if file is None:
        return _per_connection(store, name, compute)
    version = _file_version(store, file)
    cached = _by_file.get((file, name))
    if cached is not None and cached[0] == version:
        value: T = cached[1]
        return value
    # One snapshot for every statement of the computation; a commit after `version` was read
    # makes the next call compute again.
    store.db.execute("BEGIN")
    try:
        value = compute(store)
    finally:
        store.db.execute("COMMIT")
    _by_file[(file, name)] = (version, value)
    return value


def _file(store: Store) -> File | None:
    if store.path == ":memory:" or store.path.startswith("file:"):
        return None
    try:
        found = os.stat(store.path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _file_version(store: Store, file: File) -> int:
    with _lock:
        watcher = _watchers.get(file)
        if watcher is None:
            watcher = apsw.Connection(store.path)
            watcher.setbusytimeout(5000)
            _watchers[file] = watcher
            while len(_watchers) > _WATCHED:
                old, closing = _watchers.popitem(last=False)
                for key in [key for key in _by_file if key[0] == old]:
                    del _by_file[key]
                closing.close()
        _watchers.move_to_end(file)
        row = watcher.execute("PRAGMA data_version").fetchone()
        assert row is not None  # a PRAGMA that reads a value always answers one row
        return int(row[0])


def _per_connection(store: Store, name: str, compute: Callable[[Store], T]) -> T:
    version = (store.value("PRAGMA data_version"), store.db.total_changes())
    values = _by_store.setdefault(store, {})
    cached = values.get(name)
    if cached is not None and cached[0] == version:
        value: T = cached[1]
        return value
    value = compute(store)
    values[name] = (version, value)
    return value
