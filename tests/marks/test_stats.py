"""`GET /stats` and `db info`'s counts: each exact, each read from an index (schema 13)."""

import apsw

from marks import schema
from marks.library import Library
from marks.maintenance import stats
from marks.store import Store
from support.marksrun import Runner
from support.oldschema import before_14

ROWS = [  # url, domain, visit_count, reachable
    ("https://a.example/1", "a.example", 0, None),
    ("https://a.example/2", "a.example", 3, 1),
    ("https://b.example/1", "b.example", 1, 0),
    ("javascript:void(0)", "", 0, None),
    ("https://c.example/1", "c.example", 0, 1),
]


def test_an_older_library_gains_the_checked_index_keeps_every_row_and_counts_right(tmp_path):
    path = tmp_path / "old.db"
    Store(path).close()
    old = apsw.Connection(str(path))
    before_14(old)
    old.execute("DROP INDEX bookmarks_checked; PRAGMA user_version = 12")  # as before schema 13
    old.executemany(
        "INSERT INTO bookmarks (url, url_key, domain, added, visit_count, reachable) "
        "VALUES (?, ?, ?, '2026-01-01T00:00:00Z', ?, ?)",
        [(url, url, domain, visits, reachable) for url, domain, visits, reachable in ROWS],
    )
    before = old.execute("SELECT * FROM bookmarks ORDER BY id").fetchall()
    old.close()

    store = Store(path)
    assert store.value("PRAGMA user_version") == schema.VERSION
    assert store.execute("SELECT * FROM bookmarks ORDER BY id").fetchall() == before
    assert store.value("SELECT name FROM sqlite_schema WHERE name = 'bookmarks_checked'")
    counts = stats(Library(store))
    assert {key: counts[key] for key in ("bookmarks", "unread", "unchecked", "broken")} == {
        "bookmarks": 5,
        "unread": 3,
        "unchecked": 2,
        "broken": 1,
    }
    assert counts["domains"] == 4  # the empty domain of the bookmarklet is one, as before
    assert counts["total_visits"] == 4
    store.close()


def test_counts_follow_a_link_check_and_a_visit(library):
    first = library.add("https://a.example/1")
    library.add("https://b.example/1")
    assert stats(library)["unchecked"] == 2 and stats(library)["unread"] == 2
    library.store.execute("UPDATE bookmarks SET reachable = 0 WHERE id = ?", (first.id,))
    library.visit(first.id)
    counts = stats(library)
    assert (counts["unchecked"], counts["broken"], counts["unread"]) == (1, 1, 1)
    assert (counts["domains"], counts["total_visits"]) == (2, 1)


def test_served_stats_follow_the_servers_own_writes_and_another_process(served):
    served.add("https://a.example/1")
    assert served.http.get("/stats").json()["bookmarks"] == 1
    made = served.add("https://b.example/1")  # the server's own connection writes
    assert served.http.get("/stats").json()["bookmarks"] == 2
    done = Runner(served.db).process("bookmark", "delete", "--yes", str(made["id"]))
    assert done.code == 0, done.err
    counts = served.http.get("/stats").json()
    assert (counts["bookmarks"], counts["domains"]) == (1, 1)
