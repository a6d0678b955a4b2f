"""What hangs on a bookmark and how its rows are kept: the trash's and the undo journal's
common ground.

Below the library (SQL on a `Store`, inside the caller's transaction). What hangs on a bookmark
is found through the schema: every table with a foreign key to `bookmarks` (PRAGMA
foreign_key_list), so a table a later migration adds is kept without a change here. A row is kept
as a JSONB object of its columns (a BLOB as `{"hex": ...}`); a bookmark's tags are kept by name
and matched again by name when they come back (`tag_map`). While many bookmarks move, the
full-text indexes are kept in one statement each (`indexed_at_once`).
"""

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from marks.store import Store

# Per-bookmark rows without a foreign key (graph edges are emptied at once on a rebuild, see
# schema 7): kept like the others, and restored when both of their bookmarks are back.
UNLINKED = (("graph_edges", "source"), ("graph_edges", "target"))
# A bookmark's tags: rows of `tags` (found by name, not id, when they come back).
TAGS = "tags"


# --- what hangs on a bookmark -----------------------------------------------------------------


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def columns(store: Store, table: str) -> list[str]:
    """The table's stored columns (generated ones are computed, never kept)."""
    return [name for (name,) in store.execute("SELECT name FROM pragma_table_info(?)", (table,))]


def dependents(store: Store) -> list[tuple[str, str]]:
    """(table, column) for every column that refers to a bookmark, foreign key or not."""
    found = list(
        store.execute(
            'SELECT m.name, f."from" FROM sqlite_schema m, pragma_foreign_key_list(m.name) f '
            "WHERE m.type = 'table' AND f.\"table\" = 'bookmarks' ORDER BY m.name, f.id"
        )
    )
    tables = {name for (name,) in store.execute("SELECT name FROM sqlite_schema")}
    return found + [(t, c) for t, c in UNLINKED if t in tables]


def parents(store: Store, table: str) -> list[tuple[str, str, str]]:
    """(column, parent table, parent column) for a dependent table's other foreign keys."""
    return [
        (source, parent, target or "rowid")
        for parent, source, target in store.execute(
            'SELECT "table", "from", "to" FROM pragma_foreign_key_list(?)', (table,)
        )
        if parent != "bookmarks"
    ]


def as_json(store: Store, table: str, alias: str) -> str:
    """SQL that turns a row into a JSON object, BLOBs as {"hex": ...}."""
    parts = []
    for name in columns(store, table):
        column = f"{alias}.{quote(name)}"
        blob = f"json_object('hex', hex({column}))"
        value = f"CASE typeof({column}) WHEN 'blob' THEN {blob} ELSE {column} END"
        parts.append(f"'{name.replace(chr(39), chr(39) * 2)}', {value}")
    return f"jsonb_object({', '.join(parts)})"  # JSONB: read back without parsing text


def stored_value(value: Any) -> Any:
    if isinstance(value, dict):
        return bytes.fromhex(value["hex"])
    return value


# --- the full-text index, kept in one statement instead of row by row ----------------------
# A restore or delete of thousands of bookmarks through the per-row triggers takes seconds
# (measured: 16 s to put 10,000 back); like an import (`marks.importing.bulk_load`), the
# triggers are dropped inside the transaction and the rows indexed with one statement each.
# SQLite's DDL is transactional: a failure restores the triggers with everything else.

# index -> (the rows it indexes, its columns), as in marks.importing.INDEXES
INDEXES = {
    "bookmarks_fts": ("bookmarks_fts_source", "title, description, url, tags, page_text"),
    "bookmarks_words": ("bookmarks", "title, description, url, tags"),
}
# The triggers that do the same one row at a time (and the tag text trigger, whose work the
# restore does in one UPDATE).
ROW_TRIGGERS = {
    "insert": (
        "bookmarks_fts_insert",
        "bookmarks_fts_update",
        "bookmarks_words_insert",
        "bookmarks_words_update",
        "bookmark_tags_added",
    ),
    "delete": ("bookmarks_fts_delete", "bookmarks_words_delete", "bookmark_tags_removed"),
}


@contextlib.contextmanager
def indexed_at_once(store: Store, kind: str, ids_table: str) -> Iterator[None]:
    """Within the caller's transaction: the block's bookmarks (those in temp.`ids_table`) go
    into (kind "insert", after the block) or out of (kind "delete", before it) the full-text
    indexes in one statement each, with the per-row triggers off meanwhile. Without FTS5 the
    index's triggers are not there (see `marks.store`) and there is no index to keep."""
    present = {
        name for (name,) in store.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'")
    }
    dropped = [name for name in ROW_TRIGGERS[kind] if name in present]
    saved = [
        store.value("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)) for name in dropped
    ]
    indexes = {index: spec for index, spec in INDEXES.items() if f"{index}_{kind}" in present}
    chosen = f"WHERE id IN (SELECT id FROM temp.{ids_table})"
    if kind == "delete":
        for index, (source, names) in indexes.items():
            store.execute(
                f"INSERT INTO {index} ({index}, rowid, {names}) "
                f"SELECT 'delete', id, {names} FROM {source} {chosen}"
            )
    for name in dropped:
        store.execute(f'DROP TRIGGER "{name}"')
    yield
    if kind == "insert":
        for index, (source, names) in indexes.items():
            store.execute(
                f"INSERT INTO {index} (rowid, {names}) SELECT id, {names} FROM {source} {chosen}"
            )
    for sql in saved:
        store.execute(sql)


# --- the bookmarks a change works on, and tags found again by name ----------------------------


def temp_ids(store: Store, name: str, ids: Iterable[int]) -> None:
    """temp.`name` holds these ids (and an `entry` column for the trash's rows), nothing else."""
    store.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY, entry INTEGER)")
    store.execute(f"DELETE FROM temp.{name}")
    store.db.executemany(f"INSERT OR IGNORE INTO temp.{name} (id) VALUES (?)", ((i,) for i in ids))


def tag_map(
    store: Store, saved: dict[int, str], undoing: bool = False, renamed: set[int] | None = None
) -> dict[int, int]:
    """Each kept tag id -> the id of the live tag with its name: the same tag if it is still
    there, the tag that has its name now (names ignore case), or the tag made again (with its
    old id when that is free). `undoing`: the bookmarks in temp.undoing get their tags back, so
    a tag renamed since that only they carry takes its old name back."""
    mapping: dict[int, int] = {}
    for old_id, name in saved.items():
        live = store.value("SELECT name FROM tags WHERE id = ?", (old_id,))
        holder = store.value("SELECT id FROM tags WHERE key = casefold(?)", (name,))
        if live == name:
            mapping[old_id] = old_id
            continue
        if undoing and live is not None and holder in (None, old_id):
            others = store.one(
                "SELECT 1 FROM bookmark_tags WHERE tag_id = ? AND bookmark_id NOT IN "
                "(SELECT id FROM temp.undoing) LIMIT 1",
                (old_id,),
            )
            if others is None:
                store.execute("UPDATE tags SET name = ? WHERE id = ?", (name, old_id))
                mapping[old_id] = old_id
                if renamed is not None:
                    renamed.add(old_id)
                continue
        if holder is not None:
            mapping[old_id] = holder
        elif live is None:
            store.execute("INSERT INTO tags (id, name) VALUES (?, ?)", (old_id, name))
            mapping[old_id] = old_id
        else:
            store.execute("INSERT INTO tags (name) VALUES (?)", (name,))
            mapping[old_id] = store.db.last_insert_rowid()
    return mapping
