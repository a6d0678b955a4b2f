"""The trash as stored: moving bookmarks and everything that hangs on them into the trash,
listing and forgetting what is there, and putting it back.

Below the library (SQL on a `Store`, inside the caller's transaction); what hangs on a bookmark
and how its rows are kept is `marks.dependents`. Rows those rows point to in other tables (a
bookmark's tags) are kept beside them; tags are matched again by name when they come back. A
column a later migration adds gets its default on restore.
"""

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import apsw
import msgspec

from marks import clock
from marks.dependents import (
    TAGS,
    as_json,
    columns,
    dependents,
    indexed_at_once,
    parents,
    quote,
    stored_value,
    tag_map,
    temp_ids,
)
from marks.store import Store


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


# --- into the trash ---------------------------------------------------------------------------


def move(store: Store, ids: Sequence[int], now: dt.datetime, step: int | None) -> None:
    """Move existing bookmarks and everything that hangs on them into the trash (within the
    caller's transaction), then delete them: the full-text triggers take them out of search."""
    temp_ids(store, "moving", ids)
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
        keep + f"SELECT m.entry, 'bookmarks', {as_json(store, 'bookmarks', 'r')} "
        "FROM bookmarks r JOIN temp.moving m ON m.id = r.id"
    )
    for table, column in dependents(store):
        join = f"FROM {quote(table)} r JOIN temp.moving m ON m.id = r.{quote(column)}"
        store.execute(keep + f"SELECT m.entry, ?, {as_json(store, table, 'r')} {join}", (table,))
        for source, parent, target in parents(store, table):
            store.execute(
                keep + f"SELECT DISTINCT m.entry, ?, {as_json(store, parent, 'p')} {join} "
                f"JOIN {quote(parent)} p ON p.{quote(target)} = r.{quote(source)}",
                (parent,),
            )
    with indexed_at_once(store, "delete", "moving"):
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
        f"INSERT {'OR IGNORE ' if ignore else ''}INTO {quote(table)} "
        f"({', '.join(map(quote, names))}) VALUES ({', '.join('?' * len(names))})"
    )
    values = [[stored_value(row.get(name)) for name in names] for row in rows]
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
        f"INSERT {'OR IGNORE ' if ignore else ''}INTO {quote(table)} "
        f"({', '.join(map(quote, names))}) SELECT {', '.join(values)} "
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
    tag_ids = tag_map(store, saved_tags)
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
    temp_ids(store, "restored", [row[2] for row in plan])
    store.execute("PRAGMA defer_foreign_keys = ON")  # rows before their bookmark
    with indexed_at_once(store, "insert", "restored"):
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
