"""The trash and the undo journal as stored: moving bookmarks into the trash and back, and the
before-images that let `marks undo` put back what a change overwrote.

Below the library (it runs SQL on a `Store`, inside the caller's transaction). What hangs on a
bookmark is found through the schema: every table with a foreign key to `bookmarks` (PRAGMA
foreign_key_list), so a table a later migration adds is trashed and restored without a change
here. Each row is kept as a JSONB object of its columns (a BLOB as `{"hex": ...}`), so a column a
later migration adds gets its default on restore. Rows those rows point to in other tables (a
bookmark's tags) are kept beside them; tags are matched again by name when they come back.
"""

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from marks import clock, limits
from marks.dependents import dependents, quote, tag_map, temp_ids
from marks.exceptions import Conflict
from marks.store import Store

# The trash as stored lives in marks.trashrows; its names are the journal's too, as before.
from marks.trashrows import Restored, TrashEntry, entries, move, next_id, purge, restore, tidy

__all__ = [
    "MAX_DAYS",
    "TRASH_DAYS",
    "UNDO_STEPS",
    "Restored",
    "Step",
    "TrashEntry",
    "begin",
    "dependents",
    "describe",
    "entries",
    "forget",
    "last",
    "move",
    "next_id",
    "purge",
    "put_back",
    "restore",
    "save",
    "tidy",
]


# Why 20: enough to walk back a session's mistakes one by one, few enough that the journal stays
# small (a step keeps only what its change overwrote; a deleted bookmark's rows are in the trash,
# which `trash_days` bounds). Older steps are forgotten; their bookmarks stay in the trash.
UNDO_STEPS = 20
TRASH_DAYS = limits.TRASH_DAYS  # config `trash_days`: how long a deleted bookmark waits
MAX_DAYS = 100_000  # any longer is "forever" (and a date before year 1 cannot be written)


# --- the undo journal -------------------------------------------------------------------------


class Step(msgspec.Struct):
    id: int
    at: dt.datetime | None
    action: str
    summary: str


def begin(store: Store, action: str, now: dt.datetime) -> int:
    """A new step (the oldest beyond UNDO_STEPS are forgotten)."""
    store.execute("INSERT INTO undo_steps (at, action) VALUES (?, ?)", (clock.to_text(now), action))
    step = store.db.last_insert_rowid()
    store.execute("DELETE FROM undo_steps WHERE id <= ?", (step - UNDO_STEPS,))
    return step


def describe(store: Store, step: int, summary: str) -> None:
    store.execute("UPDATE undo_steps SET summary = ? WHERE id = ?", (summary, step))


def forget(store: Store, step: int) -> None:
    store.execute("DELETE FROM undo_steps WHERE id = ?", (step,))


def last(store: Store) -> Step | None:
    row = store.one("SELECT id, at, action, summary FROM undo_steps ORDER BY id DESC LIMIT 1")
    return None if row is None else Step(row[0], clock.from_text(row[1]), row[2], row[3])


def save(store: Store, step: int, ids: Iterable[int], fields: Sequence[str], tags: bool) -> None:
    """Before-images of bookmarks about to change: the columns `fields`, and their tags."""
    temp_ids(store, "saving", ids)
    as_json = (
        "json_object(" + ", ".join(f"'{name}', b.{quote(name)}" for name in fields) + ")"
        if fields
        else "NULL"
    )
    tag_ids = (
        "(SELECT json_group_array(tag_id) FROM bookmark_tags WHERE bookmark_id = b.id)"
        if tags
        else "NULL"
    )
    store.execute(
        f"INSERT INTO undo_bookmarks (step, bookmark_id, fields, tag_ids) "
        f"SELECT ?, b.id, {as_json}, {tag_ids} FROM bookmarks b JOIN temp.saving s ON s.id = b.id",
        (step,),
    )
    if tags:
        store.execute(
            "INSERT INTO undo_tags (step, tag_id, name) SELECT DISTINCT ?, t.id, t.name "
            "FROM bookmark_tags bt JOIN temp.saving s ON s.id = bt.bookmark_id "
            "JOIN tags t ON t.id = bt.tag_id WHERE t.id NOT IN "
            "(SELECT tag_id FROM undo_tags WHERE step = ?)",
            (step, step),
        )
    store.execute("DELETE FROM temp.saving")


def put_back(store: Store, step: int) -> int:
    """Apply a step's before-images (the earliest image of each bookmark wins); returns how
    many bookmarks changed back. A URL taken again meanwhile stops the undo (Conflict)."""
    import json

    images: list[Any] = store.execute(
        "SELECT bookmark_id, fields, tag_ids FROM undo_bookmarks WHERE step = ? "
        "ORDER BY rowid DESC",
        (step,),
    ).fetchall()
    if not images:
        return 0
    temp_ids(store, "undoing", {bid for bid, _, _ in images})
    saved = dict(store.execute("SELECT tag_id, name FROM undo_tags WHERE step = ?", (step,)))
    renamed: set[int] = set()
    tag_ids = tag_map(store, saved, undoing=True, renamed=renamed)
    changed: set[int] = set()
    for tag in renamed:
        changed.update(
            bid
            for (bid,) in store.execute(
                "SELECT bookmark_id FROM bookmark_tags WHERE tag_id = ?", (tag,)
            )
        )
    fields_of: dict[int, dict[str, Any]] = {}
    tags_of: dict[int, list[int]] = {}
    for bid, fields, tags in images:
        if fields:
            fields_of.setdefault(bid, {}).update(json.loads(fields))
        if tags is not None:
            tags_of[bid] = [tag_ids.get(t, t) for t in json.loads(tags)]
    # Later images first, so the earliest overwrote them above; now write them.
    for bid, fields in fields_of.items():
        if store.one("SELECT 1 FROM bookmarks WHERE id = ?", (bid,)) is None:
            continue
        key = fields.get("url_key")
        if key is not None:
            clash = store.value(
                "SELECT id FROM bookmarks WHERE url_key = ? AND id != ?", (key, bid)
            )
            if clash is not None:
                raise Conflict(
                    f"cannot undo: {fields.get('url')} is bookmarked again as {clash} "
                    "(change or delete that one first)"
                )
        names = list(fields)
        store.execute(
            f"UPDATE bookmarks SET {', '.join(f'{quote(n)} = ?' for n in names)} "
            f"WHERE id = ? AND ({' OR '.join(f'{quote(n)} IS NOT ?' for n in names)})",
            (*fields.values(), bid, *fields.values()),
        )
        if store.db.changes():
            changed.add(bid)
    current: dict[int, set[int]] = {}
    for bid, tag in store.execute(
        "SELECT bookmark_id, tag_id FROM bookmark_tags WHERE bookmark_id IN "
        "(SELECT id FROM temp.undoing)"
    ):
        current.setdefault(bid, set()).add(tag)
    for bid, wanted in tags_of.items():
        if store.one("SELECT 1 FROM bookmarks WHERE id = ?", (bid,)) is None:
            continue
        have, want = current.get(bid, set()), set(wanted)
        if have == want:
            continue
        changed.add(bid)
        store.db.executemany(
            "DELETE FROM bookmark_tags WHERE bookmark_id = ? AND tag_id = ?",
            [(bid, t) for t in have - want],
        )
        store.db.executemany(
            "INSERT OR IGNORE INTO bookmark_tags (bookmark_id, tag_id) VALUES (?, ?)",
            [(bid, t) for t in want - have],
        )
    store.execute("DELETE FROM temp.undoing")
    return len(changed)
