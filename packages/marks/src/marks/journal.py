"""The trash and the undo journal as stored: moving bookmarks into the trash and back, and the
before-images that let `marks undo` put back what a change overwrote.

Below the library (it runs SQL on a `Store`, inside the caller's transaction). What hangs on a
bookmark is found through the schema: every table with a foreign key to `bookmarks` (PRAGMA
foreign_key_list), so a table a later migration adds is trashed and restored without a change
here. Each row is kept as a JSONB object of its columns (a BLOB as `{"hex": ...}`), so a column a
later migration adds gets its default on restore. Rows those rows point to in other tables (a
bookmark's tags) are kept beside them; tags are matched again by name when they come back.
"""

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw
import msgspec

from marks import clock
from marks.exceptions import Conflict
from marks.store import Store

# Why 20: enough to walk back a session's mistakes one by one, few enough that the journal stays
# small (a step keeps only what its change overwrote; a deleted bookmark's rows are in the trash,
# which `trash_days` bounds). Older steps are forgotten; their bookmarks stay in the trash.
UNDO_STEPS = 20
TRASH_DAYS = 30  # config `trash_days`: how long a deleted bookmark waits in the trash
MAX_DAYS = 100_000  # any longer is "forever" (and a date before year 1 cannot be written)
# Per-bookmark rows without a foreign key (graph edges are emptied at once on a rebuild, see
# schema 7): kept like the others, and restored when both of their bookmarks are back.
UNLINKED = (("graph_edges", "source"), ("graph_edges", "target"))
# A bookmark's tags: rows of `tags` (found by name, not id, when they come back).
TAGS = "tags"


class TrashEntry(msgspec.Struct):
    id: int  # the bookmark's id (it gets it back when restored, unless it was taken)
    url: str
    title: str
    deleted_at: dt.datetime | None
    rows: int  # rows kept with it: tags, queue entry, checks, page content, snapshots...
    undo_step: int | None = None  # the change that deleted it, while the journal remembers it


class Restored(msgspec.Struct):
    id: int  # its id now
    url: str
    title: str
    was: int  # the id it had (the same unless another bookmark took it)
    same_as: int | None = None  # its URL was bookmarked again meanwhile as this id: both kept


# --- what hangs on a bookmark -----------------------------------------------------------------


def _quote(name: str) -> str:
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


def _as_json(store: Store, table: str, alias: str) -> str:
    """SQL that turns a row into a JSON object, BLOBs as {"hex": ...}."""
    parts = []
    for name in columns(store, table):
        column = f"{alias}.{_quote(name)}"
        blob = f"json_object('hex', hex({column}))"
        value = f"CASE typeof({column}) WHEN 'blob' THEN {blob} ELSE {column} END"
        parts.append(f"'{name.replace(chr(39), chr(39) * 2)}', {value}")
    return f"jsonb_object({', '.join(parts)})"  # JSONB: read back without parsing text


def _value(value: Any) -> Any:
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
def _indexed_at_once(store: Store, kind: str, ids_table: str) -> Iterator[None]:
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


# --- into the trash ---------------------------------------------------------------------------


def _ids_table(store: Store, name: str, ids: Iterable[int]) -> None:
    store.execute(f"CREATE TEMP TABLE IF NOT EXISTS {name} (id INTEGER PRIMARY KEY, entry INTEGER)")
    store.execute(f"DELETE FROM temp.{name}")
    store.db.executemany(f"INSERT OR IGNORE INTO temp.{name} (id) VALUES (?)", ((i,) for i in ids))


def move(store: Store, ids: Sequence[int], now: dt.datetime, step: int | None) -> None:
    """Move existing bookmarks and everything that hangs on them into the trash (within the
    caller's transaction), then delete them: the full-text triggers take them out of search."""
    _ids_table(store, "moving", ids)
    first = (store.value("SELECT max(id) FROM trash") or 0) + 1
    store.execute(
        "INSERT INTO trash (bookmark_id, url, url_key, title, deleted_at, step) "
        "SELECT b.id, b.url, b.url_key, b.title, ?, ? FROM bookmarks b "
        "JOIN temp.moving m ON m.id = b.id ORDER BY b.id",
        (clock.to_text(now), step),
    )
    store.execute(
        "UPDATE temp.moving SET entry = (SELECT t.id FROM trash t "
        "WHERE t.bookmark_id = moving.id AND t.id >= ?)",
        (first,),
    )
    keep = "INSERT INTO trash_rows (entry, tbl, row) "
    store.execute(
        keep + f"SELECT m.entry, 'bookmarks', {_as_json(store, 'bookmarks', 'r')} "
        "FROM bookmarks r JOIN temp.moving m ON m.id = r.id"
    )
    for table, column in dependents(store):
        join = f"FROM {_quote(table)} r JOIN temp.moving m ON m.id = r.{_quote(column)}"
        store.execute(keep + f"SELECT m.entry, ?, {_as_json(store, table, 'r')} {join}", (table,))
        for source, parent, target in parents(store, table):
            store.execute(
                keep + f"SELECT DISTINCT m.entry, ?, {_as_json(store, parent, 'p')} {join} "
                f"JOIN {_quote(parent)} p ON p.{_quote(target)} = r.{_quote(source)}",
                (parent,),
            )
    with _indexed_at_once(store, "delete", "moving"):
        store.execute("DELETE FROM bookmarks WHERE id IN (SELECT id FROM temp.moving)")
    store.execute("DELETE FROM temp.moving")


# --- out of the trash -------------------------------------------------------------------------


def next_id(store: Store) -> int:
    """The id a new bookmark gets: never one a bookmark in the trash will want back."""
    return (
        max(
            store.value("SELECT max(id) FROM bookmarks") or 0,
            store.value("SELECT max(bookmark_id) FROM trash") or 0,
        )
        + 1
    )


def entries(store: Store, where: str = "1", bindings: Sequence[Any] = ()) -> list[TrashEntry]:
    rows = store.execute(
        "SELECT bookmark_id, url, title, deleted_at, "
        "(SELECT count(*) FROM trash_rows r WHERE r.entry = t.id), step "
        f"FROM trash t WHERE {where} ORDER BY deleted_at DESC, id DESC",
        bindings,
    )
    return [
        TrashEntry(bid, url, title, clock.from_text(at), count, step)
        for bid, url, title, at, count, step in rows
    ]


def purge(store: Store, before: dt.datetime | None) -> int:
    """Forget trash entries deleted before a time (all of them with None)."""
    if before is None:
        count = store.value("SELECT count(*) FROM trash")
        store.execute("DELETE FROM trash")
        tidy(store)
        return count
    cutoff = clock.to_text(before)
    if store.one("SELECT 1 FROM trash WHERE deleted_at <= ? LIMIT 1", (cutoff,)) is None:
        return 0  # the usual case, one index probe: no write
    count = store.value("SELECT count(*) FROM trash WHERE deleted_at <= ?", (cutoff,))
    store.execute("DELETE FROM trash WHERE deleted_at <= ?", (cutoff,))
    tidy(store)
    return count


def tidy(store: Store) -> None:
    """Forget undo steps with nothing left to undo (their bookmarks were restored by hand or
    left the trash), so `marks undo` never spends a turn on one. At most UNDO_STEPS rows."""
    store.execute(
        "DELETE FROM undo_steps WHERE NOT EXISTS (SELECT 1 FROM trash WHERE step = undo_steps.id) "
        "AND NOT EXISTS (SELECT 1 FROM undo_bookmarks WHERE step = undo_steps.id)"
    )


def _chunks(items: Sequence[Any], size: int = 500) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _tag_map(
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


def _rowid_column(store: Store, table: str) -> str | None:
    """The column that is the table's rowid (INTEGER PRIMARY KEY), if it has one."""
    keys = [
        (name, kind)
        for name, kind, pk in store.execute(
            "SELECT name, upper(type), pk FROM pragma_table_info(?)", (table,)
        )
        if pk
    ]
    return keys[0][0] if len(keys) == 1 and keys[0][1] == "INTEGER" else None


def _insert(store: Store, table: str, rows: list[dict[str, Any]], ignore: bool = False) -> None:
    """Put rows back; a row whose own id was taken meanwhile (a health check's) gets a new one."""
    if not rows:
        return
    present = set(columns(store, table))
    names = [name for name in rows[0] if name in present]
    sql = (
        f"INSERT {'OR IGNORE ' if ignore else ''}INTO {_quote(table)} "
        f"({', '.join(map(_quote, names))}) VALUES ({', '.join('?' * len(names))})"
    )
    values = [[_value(row.get(name)) for name in names] for row in rows]
    store.execute("SAVEPOINT restore_rows")
    try:
        store.db.executemany(sql, values)
        store.execute("RELEASE restore_rows")
        return
    except apsw.ConstraintError:
        store.execute("ROLLBACK TO restore_rows")
        store.execute("RELEASE restore_rows")
    rowid = _rowid_column(store, table)
    for value in values:
        try:
            store.execute(sql, value)
        except apsw.ConstraintError:
            if rowid is None or rowid not in names:
                raise
            value[names.index(rowid)] = None  # SQLite gives it a free id
            store.execute(sql, value)


def _plan(store: Store, chosen: list[Any]) -> tuple[list[Restored], list[tuple]]:
    """Where each chosen entry goes back: its old id unless taken, its URL key unless the URL
    was bookmarked again (then a key no URL can have, as migration 6 does, and both stay)."""
    owners: dict[str, int] = {}
    for chunk in _chunks([row[4] for row in chosen]):
        for key, owner in store.execute(
            f"SELECT url_key, id FROM bookmarks WHERE url_key IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            owners[str(key)] = int(owner)
    taken: set[int] = set()
    for chunk in _chunks([row[1] for row in chosen]):
        taken.update(
            i
            for (i,) in store.execute(
                f"SELECT id FROM bookmarks WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
        )
    spare = next_id(store)
    results: list[Restored] = []
    plan: list[tuple] = []  # (entry, old id, new id, url key, id it clashes with)
    for entry, old_id, url, title, key in chosen:
        new_id = old_id
        if old_id in taken:
            new_id, spare = spare, spare + 1
        taken.add(new_id)
        clash = owners.get(key)
        if clash is not None:
            key = f"{key}\ncollision {new_id}"
        else:
            owners[key] = new_id
        plan.append((entry, old_id, new_id, key, clash))
        results.append(Restored(new_id, url, title, old_id, clash))
    return results, plan


def _from_json(name: str) -> str:
    """SQL for a kept row's column (r.row), a BLOB decoded from {"hex": ...}."""
    path = "'$.\"" + name.replace("'", "''").replace('"', '\\"') + "\"'"
    return (
        f"CASE json_type(r.row, {path}) WHEN 'object' THEN unhex(json_extract(r.row, {path} || "
        f"'.hex')) ELSE json_extract(r.row, {path}) END"
    )


def _put_rows(store: Store, table: str, remap: dict[str, str], ignore: bool = False) -> None:
    """Insert the kept rows of `table` for the planned entries in one statement; the columns
    in `remap` get SQL of their own (new ids). A row whose own id was taken meanwhile (a health
    check's) makes the statement fail: then the rows go one by one (`_insert`)."""
    kept = {
        name
        for (name,) in store.execute(
            "SELECT DISTINCT j.key FROM trash_rows r JOIN temp.plan p ON p.entry = r.entry, "
            "json_each(r.row) j WHERE r.tbl = ?",
            (table,),
        )
    }
    names = [name for name in columns(store, table) if name in kept]
    values = [remap.get(name, _from_json(name)) for name in names]
    sql = (
        f"INSERT {'OR IGNORE ' if ignore else ''}INTO {_quote(table)} "
        f"({', '.join(map(_quote, names))}) SELECT {', '.join(values)} "
        "FROM trash_rows r JOIN temp.plan p ON p.entry = r.entry WHERE r.tbl = ? ORDER BY r.rowid"
    )
    store.execute("SAVEPOINT put_rows")
    try:
        store.execute(sql, (table,))
        store.execute("RELEASE put_rows")
        return
    except apsw.ConstraintError:
        store.execute("ROLLBACK TO put_rows")
        store.execute("RELEASE put_rows")
    picked = store.execute(
        f"SELECT {', '.join(values)} FROM trash_rows r JOIN temp.plan p ON p.entry = r.entry "
        "WHERE r.tbl = ? ORDER BY r.rowid",
        (table,),
    )
    rows = [dict(zip(names, row, strict=True)) for row in picked]
    _insert(store, table, rows, ignore)


def restore(store: Store, where: str, bindings: Sequence[Any] = ()) -> list[Restored]:
    """Put the trash entries chosen by `where` back (within the caller's transaction): the
    rows that hung on each bookmark first (foreign keys deferred), then the bookmarks, then
    the full-text index in one statement."""
    chosen: list[Any] = store.execute(
        f"SELECT id, bookmark_id, url, title, url_key FROM trash WHERE {where} "
        "ORDER BY deleted_at, id",
        bindings,
    ).fetchall()
    if not chosen:
        return []
    results, plan = _plan(store, chosen)
    store.execute(
        "CREATE TEMP TABLE IF NOT EXISTS plan (entry INTEGER PRIMARY KEY, old_id INTEGER, "
        "new_id INTEGER, url_key TEXT, clash INTEGER)"
    )
    store.execute("DELETE FROM temp.plan")
    store.db.executemany("INSERT INTO temp.plan VALUES (?, ?, ?, ?, ?)", plan)
    store.execute("CREATE INDEX IF NOT EXISTS temp.plan_by_old ON plan (old_id)")
    saved_tags = dict(
        store.execute(
            "SELECT DISTINCT json_extract(r.row, '$.id'), json_extract(r.row, '$.name') "
            "FROM trash_rows r JOIN temp.plan p ON p.entry = r.entry WHERE r.tbl = ?",
            (TAGS,),
        )
    )
    tag_ids = _tag_map(store, saved_tags)
    store.execute("CREATE TEMP TABLE IF NOT EXISTS tag_map (old INTEGER PRIMARY KEY, new INTEGER)")
    store.execute("DELETE FROM temp.tag_map")
    store.db.executemany("INSERT INTO temp.tag_map VALUES (?, ?)", tag_ids.items())
    to_bookmarks: dict[str, set[str]] = {}
    for table, column in dependents(store):
        to_bookmarks.setdefault(table, set()).add(column)
    kept_tables = {
        name
        for (name,) in store.execute(
            "SELECT DISTINCT r.tbl FROM trash_rows r JOIN temp.plan p ON p.entry = r.entry"
        )
    }
    tables = {name for (name,) in store.execute("SELECT name FROM sqlite_schema")}
    _ids_table(store, "restored", [row[2] for row in plan])
    store.execute("PRAGMA defer_foreign_keys = ON")  # rows before their bookmark
    with _indexed_at_once(store, "insert", "restored"):
        # Rows kept rows point to (other than tags, matched by name above): kept if still there.
        for table in sorted(kept_tables - set(to_bookmarks) - {TAGS, "bookmarks"} & tables):
            _put_rows(store, table, {}, ignore=True)
        for table in sorted(kept_tables & set(to_bookmarks) & tables - {"graph_edges"}):
            remap = {}
            for name in to_bookmarks[table]:
                column = f"({_from_json(name)})"
                remap[name] = (
                    f"coalesce((SELECT q.new_id FROM temp.plan q WHERE q.old_id = {column} "
                    f"ORDER BY q.entry = p.entry DESC LIMIT 1), {column})"
                )
            for source, parent, _ in parents(store, table):
                if parent == TAGS:
                    column = f"({_from_json(source)})"
                    remap[source] = (
                        f"coalesce((SELECT new FROM temp.tag_map WHERE old = {column}), {column})"
                    )
            _put_rows(store, table, remap)
        _put_rows(store, "bookmarks", {"id": "p.new_id", "url_key": "p.url_key"})
        # Tag text follows the links (a tag may have changed its spelling meanwhile).
        store.execute(
            "UPDATE bookmarks SET tags = fresh.names FROM (SELECT r.id AS id, "
            "(SELECT coalesce(group_concat(name, char(10)), '') FROM (SELECT t.name FROM "
            "bookmark_tags bt JOIN tags t ON t.id = bt.tag_id WHERE bt.bookmark_id = r.id "
            "ORDER BY t.name)) AS names FROM temp.restored r) AS fresh "
            "WHERE bookmarks.id = fresh.id AND bookmarks.tags IS NOT fresh.names"
        )
    store.execute(
        "INSERT OR REPLACE INTO url_key_collisions (bookmark_id, same_as, url_key) "
        "SELECT new_id, clash, substr(url_key, 1, instr(url_key, char(10)) - 1) FROM temp.plan "
        "WHERE clash IS NOT NULL"
    )
    if "graph_edges" in kept_tables and "graph_edges" in tables:
        import json  # here only: every command imports this module, few restore edges

        edges = [
            json.loads(text)
            for (text,) in store.execute(
                "SELECT json(r.row) FROM trash_rows r JOIN temp.plan p ON p.entry = r.entry "
                "WHERE r.tbl = 'graph_edges'"
            )
        ]
        remapped = {row[1]: row[2] for row in plan}
        for row in edges:
            row["source"] = remapped.get(row["source"], row["source"])
            row["target"] = remapped.get(row["target"], row["target"])
        _insert_edges(store, edges)
    store.execute("DELETE FROM trash WHERE id IN (SELECT entry FROM temp.plan)")
    for name in ("plan", "tag_map", "restored"):
        store.execute(f"DELETE FROM temp.{name}")
    return results


def _insert_edges(store: Store, rows: list[dict[str, Any]]) -> None:
    live = [
        row
        for row in rows
        if store.one("SELECT 1 FROM bookmarks WHERE id = ?", (row["source"],))
        and store.one("SELECT 1 FROM bookmarks WHERE id = ?", (row["target"],))
    ]
    _insert(store, "graph_edges", live, ignore=True)


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
    _ids_table(store, "saving", ids)
    as_json = (
        "json_object(" + ", ".join(f"'{name}', b.{_quote(name)}" for name in fields) + ")"
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
    _ids_table(store, "undoing", {bid for bid, _, _ in images})
    saved = dict(store.execute("SELECT tag_id, name FROM undo_tags WHERE step = ?", (step,)))
    renamed: set[int] = set()
    tag_ids = _tag_map(store, saved, undoing=True, renamed=renamed)
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
            f"UPDATE bookmarks SET {', '.join(f'{_quote(n)} = ?' for n in names)} "
            f"WHERE id = ? AND ({' OR '.join(f'{_quote(n)} IS NOT ?' for n in names)})",
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
