"""Query plans as SQLite makes them for a library of a million bookmarks, on a file of a few
hundred: the planner decides from `sqlite_stat1`, so statistics of the million's shape make it
plan as it would there (what ANALYZE wrote for the benchmark's generated million, see
benchmarks/million_gen.py), and EXPLAIN QUERY PLAN shows what it chose."""

import datetime as dt
import re

from marks import importing
from marks.library import Library, Record
from marks.store import Store

NOW = dt.datetime(2026, 11, 18, 10, 30, tzinfo=dt.UTC)


def fill(library: Library, size: int) -> None:
    importing.import_records(
        library,
        [
            Record(
                url=f"https://site{n % 7}.example/page/{n}",
                title=f"Page {n}",
                tags=[f"topic/t{n}", f"Area{n % 3}/sub{n}"],
                starred=n % 2 == 0,
                visit_count=n % 4,
                last_visited=NOW - dt.timedelta(days=n % 30) if n % 4 else None,
                added=NOW - dt.timedelta(days=n),
            )
            for n in range(size)
        ],
    )


ROWS = 1_000_000
# (table, index, stat): rows in the index, then rows per distinct value of each leading prefix
# of its columns. Partial indexes hold only their collection (2% starred, 1% archived, ...).
MILLION = [
    ("bookmarks", "bookmarks_added", f"{ROWS} 1"),
    ("bookmarks", "bookmarks_last_visited", f"{ROWS} 4"),
    ("bookmarks", "bookmarks_visit_count", f"{ROWS} 1687"),
    ("bookmarks", "bookmarks_domain", f"{ROWS} 184"),
    ("bookmarks", "sqlite_autoindex_bookmarks_1", f"{ROWS} 1"),
    ("bookmarks", "bookmarks_starred", "20000 1"),
    ("bookmarks", "bookmarks_archived", "10000 1"),
    ("bookmarks", "bookmarks_unread", "650000 650000 1"),
    ("bookmarks", "bookmarks_broken", "5000 1"),
    ("bookmarks", "bookmarks_untagged", "40 1"),
    ("bookmarks", "bookmarks_pdfs", "10000 1"),
    ("bookmark_tags", "bookmark_tags", "1500000 2 1"),
    ("bookmark_tags", "bookmark_tags_by_tag", "1500000 70 1"),
    ("tags", "sqlite_autoindex_tags_1", "21533 1"),
    ("tags", "tags_key", "21533 1"),
    ("reading_queue", "reading_queue_open", "200 100 2 1"),
    ("health_checks", "health_checks_by_bookmark", "50000 10 1"),
]
# A table scanned without any index: every row read, whatever the page shown.
_FULL_SCAN = re.compile(r"SCAN (\w+)")
LARGE = {"bookmarks", "b", "bookmark_tags", "bt", "health_checks"}


def million_shaped(store: Store) -> None:
    """Statistics of a million bookmarks in place of the file's own, reloaded at once."""
    store.execute("ANALYZE")  # creates sqlite_stat1 (and a row for every index that has rows)
    indexes = {
        name for (name,) in store.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")
    }
    with store.transaction():
        store.execute("DELETE FROM sqlite_stat1")
        for table, index, stat in MILLION:
            if index in indexes:  # an index a later schema dropped is no longer planned with
                store.execute("INSERT INTO sqlite_stat1 VALUES (?, ?, ?)", (table, index, stat))
    store.execute("ANALYZE sqlite_schema")  # the planner rereads the statistics


def plan(store: Store, sql: str, bindings) -> list[str]:
    return [row[3] for row in store.execute("EXPLAIN QUERY PLAN " + sql, bindings)]


def problems(store: Store, sql: str, bindings) -> list[str]:
    """What in a statement's plan reads more than the rows it answers with: a large table
    scanned without an index, or every match sorted to show a page (a listing whose order no
    index gives). Ranking full-text hits sorts them by nature (BM25 is computed per hit)."""
    found = []
    steps = plan(store, sql, bindings)
    for step in steps:
        scan = _FULL_SCAN.fullmatch(step)
        if scan and scan.group(1) in LARGE:
            found.append(step)
    ranked = " MATCH " in sql
    if "LIMIT" in sql and not ranked and "reading_queue" not in sql:
        found += [step for step in steps if step == "USE TEMP B-TREE FOR ORDER BY"]
    return found
