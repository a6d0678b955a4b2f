"""The statements behind what a user runs most, planned as for a million bookmarks: `bookmark
list`, `bookmark search --fts`, `ls` of the root and of every top-level directory, and the REST
list. None scans the bookmarks without an index, or sorts every match to show one page (see
support.plans: the statistics of a million on a small file)."""

import types

import pytest

from marks import queue
from marks.library import Library
from marks.maintenance import stats
from marks.server.routes_bookmarks import list_bookmarks
from marks.shell import run_script
from marks.shell.commands import Session
from marks.store import Store
from support.plans import NOW, fill, million_shaped, plan, problems


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    library = Library(Store(tmp_path_factory.mktemp("plans") / "library.db"))
    fill(library, 240)
    queue.ReadingQueue(library.store).add([3, 5])  # /queue has something to list
    million_shaped(library.store)
    yield library
    library.store.close()


def traced(library: Library, action) -> list[tuple[str, tuple]]:
    """Every query the action sends to SQLite, with its bindings."""
    statements: list[tuple[str, tuple]] = []

    def trace(cursor, sql, bindings) -> bool:
        if sql.lstrip().upper().startswith(("SELECT", "WITH")):
            statements.append((sql, bindings or ()))
        return True

    library.store.db.exec_trace = trace
    try:
        action(library)
    finally:
        library.store.db.exec_trace = None
    return statements


def shell(script: str, out: list[str] | None = None):
    def run(library: Library) -> None:
        errors: list[str] = []
        session = Session(
            library,
            write=(out.append if out is not None else lambda text: None),
            confirm=lambda question: True,
            now=lambda: NOW,
        )
        assert run_script(session, script, errors.append) == 0, errors

    return run


def top_directories(library: Library) -> list[str]:
    shown: list[str] = []
    shell("ls /", shown)(library)
    return ["/" + line.split("/")[0] for line in "".join(shown).splitlines()]


def rest_list(library: Library) -> None:
    """What `GET /bookmarks?limit=50` runs: the route's own handler with the query it parses."""
    query = {"query": "", "sort": "added", "reverse": False, "limit": 50, "offset": 0}
    list_bookmarks(library, types.SimpleNamespace(query={**query, "tag": "", "starred": None}))


def test_unread_is_listed_from_its_own_index_at_a_million(library):
    # Most of a library is unread: its page must come from an index in its order, not from
    # the older index on visit_count followed by a sort of 600,000 rows (schema 11).
    assert library.store.value("SELECT stat FROM sqlite_stat1 WHERE idx = 'bookmarks_added'") == (
        "1000000 1"
    )
    sql = "SELECT url FROM bookmarks WHERE visit_count = 0 ORDER BY added DESC, id DESC LIMIT 50"
    assert plan(library.store, sql, ()) == [
        "SEARCH bookmarks USING INDEX bookmarks_unread (visit_count=?)"
    ]


def test_what_users_run_most_reads_only_what_it_shows(library):
    directories = top_directories(library)
    # Every directory the root lists, whatever its name (a later one is checked too).
    assert {"/bookmarks", "/tags", "/starred", "/unread", "/domains", "/queue"} <= set(directories)
    actions = {
        "bookmark list": lambda library: library.list_bookmarks(limit=50),
        "bookmark search --fts": lambda library: library.search("page", fts=True, limit=50),
        "GET /bookmarks?limit=50": rest_list,
        "GET /stats": stats,  # the web UI's sidebar asks for it on every visit
        "ls /": shell("ls /"),
        **{f"ls {path}": shell(f"ls {path}") for path in directories},
    }
    found = {}
    for name, action in actions.items():
        statements = traced(library, action)
        for sql, bindings in statements:
            bad = problems(library.store, sql, bindings)
            if bad:
                found[name] = (sql, bad)
    assert found == {}


def test_the_plan_check_finds_a_full_scan_and_a_sort(library):
    # The check itself: a filter no index serves, and an order none gives, are both reported.
    assert problems(library.store, "SELECT id FROM bookmarks WHERE title = ? LIMIT 5", ("x",)) == [
        "SCAN bookmarks"
    ]
    assert problems(
        library.store, "SELECT id FROM bookmarks WHERE domain = ? ORDER BY title LIMIT 5", ("x",)
    ) == ["USE TEMP B-TREE FOR ORDER BY"]


@pytest.fixture(scope="module")
def unanalysed(tmp_path_factory):
    """A library as `marks import` leaves it: no statistics, the planner's own guesses."""
    library = Library(Store(tmp_path_factory.mktemp("plans") / "fresh.db"))
    fill(library, 240)
    yield library
    library.store.close()


@pytest.mark.parametrize("statistics", ["a million's", "none"])
def test_a_tag_filter_reads_only_that_tags_entries(library, unanalysed, statistics):
    # A tag and its subtags (`#topic`: `topic`, `topic/t1`, ...) are a range of the tags' key
    # index, then their bookmarks come from bookmark_tags' index by tag. With `key = 'topic'
    # OR key LIKE 'topic/%' ESCAPE '\\'`, which no index serves, SQLite without statistics read
    # every tag of every bookmark and joined each to its tag (1.4 s at a million, for a tag of
    # 175 bookmarks).
    chosen = library if statistics == "a million's" else unanalysed
    actions = {
        "bookmark search --fts '#topic'": lambda lib: lib.search("#topic", fts=True, limit=50),
        "bookmark search --fts 'page #topic'": lambda lib: lib.search("page #topic", fts=True),
        "bookmark list --tag topic": lambda lib: lib.list_bookmarks(limit=50, tag="topic"),
        "ls /tags/topic": shell("ls /tags/topic"),
    }
    found = {}
    for name, action in actions.items():
        for sql, bindings in traced(chosen, action):
            steps = plan(chosen.store, sql, bindings)
            scans = [step for step in steps if step.startswith(("SCAN bt", "SCAN bookmark_tags"))]
            if scans:
                found[name] = (sql, scans)
    assert found == {}


def test_a_search_page_ranks_without_writing_its_ranked_pool_to_a_table(library):
    # `bookmark search --fts` and the web UI ask for a page: the ranked pool (the newest
    # RANKED_HITS hits) streams into the page's sort. Written to a table first, as the
    # statement for every hit (the shell's `find`) still does to find the unranked older hits,
    # it cost a tenth of `kernel`'s search at a million.
    def steps(limit: int | None) -> list[str]:
        statements = traced(library, lambda lib: lib.search("page", fts=True, limit=limit))
        ranking = [(sql, bindings) for sql, bindings in statements if "bm25(" in sql]
        assert len(ranking) == 1
        return plan(library.store, *ranking[0])

    assert not [step for step in steps(50) if "MATERIALIZE" in step]
    assert "MATERIALIZE pool" in steps(None)


@pytest.mark.parametrize("statistics", ["a million's", "none"])
def test_ls_tags_reads_its_kept_directories_in_their_order(library, unanalysed, statistics):
    # `ls /tags` is one pass over `tag_roots` (schema 14), whose key order is the listing's:
    # no tag name read, nothing sorted. The kept table's triggers find a root's first tag with
    # one seek of `tags_root`, not a scan of every tag (SQLite does not call an index on a
    # virtual column covering, but reads the column from it: the table's row is not read).
    store = (library if statistics == "a million's" else unanalysed).store
    statements = traced(library if statistics == "a million's" else unanalysed, shell("ls /tags"))
    assert [plan(store, sql, bindings) for sql, bindings in statements] == [["SCAN tag_roots"]]
    assert plan(store, "SELECT min(name) FROM tags WHERE root = ?", ("dev",)) == [
        "SEARCH tags USING INDEX tags_root (root=?)"
    ]
    assert plan(store, "SELECT 1 FROM tags WHERE root = ?", ("dev",)) == [
        "SEARCH tags USING INDEX tags_root (root=?)"
    ]
