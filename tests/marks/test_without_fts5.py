"""marks on a SQLite without FTS5: every command works, `--fts` falls back to substring search and
says so once, and the full-text index is whole again when a SQLite with FTS5 opens the file.

The modules are dropped from real connections (support.nofts5, through APSW's own
`apsw.connection_hooks`); the files, the CLI, the shell and the server are the real ones.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marks import schema
from marks.library import FULL_TEXT_MISSING, Invalid, Library
from marks.store import Store
from support.marksserve import Served, start_marks
from support.nofts5 import environment, without_fts5
from support.websites import Websites

FALLBACK = f"marks: {FULL_TEXT_MISSING}\n"
HTML = """<!DOCTYPE NETSCAPE-Bookmark-file-1>
<DL><p>
<DT><H3>Reading</H3>
<DL><p>
<DT><A HREF="https://imported.example/ferris" ADD_DATE="1700000000">Ferris the crab</A>
<DT><A HREF="https://a.example/" ADD_DATE="1600000000" TAGS="merged">Alpha</A>
</DL><p>
</DL><p>
"""


@pytest.fixture(scope="module")
def web():
    with Websites(hosts=1, slow_seconds=1) as sites:
        sites.pages["whale"] = ("Whales", "The narwhal sings under the arctic ice.")
        yield sites


def ok(result):
    assert result.code == 0, result.err
    return result


def found(marks, *query: str) -> list[int]:
    """Ids a ranked full-text search finds (FTS5 present: no fallback)."""
    result = ok(marks("-o", "json", "bookmark", "search", "--fts", *query))
    assert FULL_TEXT_MISSING not in result.err
    return sorted(hit["id"] for hit in json.loads(result.out))


def test_a_new_database_without_fts5_does_everything(marks, tmp_path):
    (tmp_path / "export.html").write_text(HTML)
    with without_fts5():
        ok(marks("bookmark", "add", "https://python.org", "--title", "Python docs", "--no-fetch"))
        ok(marks("bookmark", "add", "https://a.example", "--tags", "dev/old", "--no-fetch"))
        ok(marks("import", "html", str(tmp_path / "export.html"), "--update"))
        ok(marks("bookmark", "update", "1", "--title", "Python language", "--tags", "dev/python"))
        ok(marks("tag", "rename", "dev", "code", "--yes"))
        ok(marks("tag", "add", "later", "1", "--yes"))

        table = ok(marks("bookmark", "search", "--fts", "python"))
        assert table.err == FALLBACK and "Python language" in table.out
        as_json = ok(marks("-o", "json", "bookmark", "search", "--fts", "pyth* #code"))
        assert as_json.err == FALLBACK
        assert [hit["id"] for hit in json.loads(as_json.out)] == [1]  # stdout is only JSON
        # The query language still holds, each word or phrase a substring.
        none = ok(marks("-o", "json", "bookmark", "search", "--fts", "python -#later"))
        assert json.loads(none.out) == [] and none.err == FALLBACK
        plain = ok(marks("bookmark", "search", "python"))  # no --fts asked: nothing to say
        assert plain.err == "" and "Python language" in plain.out

        for command in ("build-index", "index-stats"):
            refused = marks("db", command)
            assert refused.code == 1 and refused.out == ""
            assert refused.err.count("\n") == 1 and "this SQLite has no FTS5" in refused.err
        assert json.loads(ok(marks("-o", "json", "db", "info")).out)["full_text_search"] is False
        ok(marks("bookmark", "delete", "2", "--yes"))
        schema_sql = ok(marks("db", "schema")).out
        assert "USING fts5" not in schema_sql and "INTO bookmarks_fts" not in schema_sql

    # A SQLite with FTS5 builds the index (saying so once) and it holds everything.
    first = ok(marks("bookmark", "list"))
    assert "full-text index rebuilt (2 bookmark(s))" in first.err
    assert found(marks, "python") == [1]
    assert found(marks, "ferris") == [3]
    assert found(marks, "#code/python") == [1]
    assert found(marks, "alpha") == []  # deleted while the index was away
    stats = json.loads(ok(marks("-o", "json", "db", "index-stats")).out)
    assert stats["indexed_rows"] == stats["bookmarks"] == 2 and stats["integrity"] == "ok"
    assert ok(marks("bookmark", "list")).err == ""  # built once


def test_a_database_made_with_fts5_accepts_writes_without_it(marks, tmp_path):
    ok(marks("bookmark", "add", "https://a.example", "--title", "Alpha rust", "--no-fetch"))
    ok(marks("bookmark", "add", "https://b.example", "--title", "Beta rust", "--no-fetch"))
    ok(marks("bookmark", "add", "https://c.example", "--title", "Gamma rust", "--no-fetch"))
    (tmp_path / "export.html").write_text(HTML)

    with without_fts5():
        added = ok(marks("bookmark", "add", "https://d.example", "--title", "Delta", "--no-fetch"))
        assert "rebuilt when a SQLite with FTS5 opens this file" in added.err  # said once
        ok(marks("import", "html", str(tmp_path / "export.html"), "--update"))
        ok(marks("bookmark", "update", "2", "--title", "Beta golang"))
        ok(marks("bookmark", "delete", "3", "--yes"))
        ok(marks("tag", "add", "ocean", "4", "--yes"))
        searched = ok(marks("bookmark", "search", "--fts", "rust"))
        assert searched.err == FALLBACK  # one line; the index's notice was given before
        assert "Alpha rust" in searched.out and "Beta" not in searched.out
        refused = marks("db", "build-index")
        assert refused.code == 1 and refused.err.count("\n") == 1 and "FTS5" in refused.err

    # Back with FTS5: the index knows every change made meanwhile, and nothing is lost.
    assert "full-text index rebuilt (4 bookmark(s))" in ok(marks("bookmark", "list")).err
    assert found(marks, "rust") == [1]
    assert found(marks, "golang") == [2]
    assert found(marks, "gamma") == []
    assert found(marks, "delta #ocean") == [4]
    assert found(marks, "ferris") == [5]
    assert found(marks, "#reading #merged") == [1]  # the import merged its folder tag into 1
    assert found(marks, "fer*") == [5]  # the prefix index too
    stats = json.loads(ok(marks("-o", "json", "db", "index-stats")).out)
    assert stats["indexed_rows"] == stats["bookmarks"] == 4 and stats["integrity"] == "ok"
    # And it keeps following changes as before.
    ok(marks("bookmark", "update", "4", "--title", "Delta whales"))
    assert found(marks, "whale") == [4]


def test_page_text_stored_without_fts5_is_searchable_when_it_returns(marks, web):
    with without_fts5():
        url = web.url("/page/whale")
        ok(marks("bookmark", "add", url, "--title", "Sea animals", "--no-fetch"))
        ok(marks("content", "refresh", "1"))
        assert "narwhal" in ok(marks("content", "view", "1")).out
        ok(marks("content", "refresh", "1", "--force"))  # an update of the stored text
    assert found(marks, "narwhal") == [1]
    ok(marks("bookmark", "delete", "1", "--yes"))
    assert found(marks, "narwhal") == []


def test_the_shell_find_falls_back_and_says_so_once(marks):
    with without_fts5():
        ok(marks("bookmark", "add", "https://python.org", "--title", "Python", "--no-fetch"))
        ok(
            marks(
                "bookmark", "add", "https://go.dev", "--title", "Go", "--tags", "lang", "--no-fetch"
            )
        )
        result = ok(marks("shell", "-c", "find python; find #lang; cd /tags/lang; find python"))
    assert result.err == f"marks: find: {FULL_TEXT_MISSING}\n"
    lines = result.out.splitlines()
    assert len(lines) == 2 and "Python" in lines[0] and "Go" in lines[1]


def test_the_server_answers_fts_searches_with_substring_and_says_so(tmp_path):
    db = tmp_path / "library.db"
    server = Served(start_marks(db, tmp_path, env=environment()), db, tmp_path)
    try:
        server.add("https://python.org", title="Python language", tags=["dev"])
        server.add("https://rust-lang.org", title="Rust language")
        answer = server.http.get("/search", params={"q": "language -#dev", "fts": 1})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["method"] == "substring" and body["notice"] == FULL_TEXT_MISSING
        assert [hit["bookmark"]["title"] for hit in body["hits"]] == ["Rust language"]
        plain = server.http.get("/search", params={"q": "python"}).json()
        assert plain["method"] == "substring" and plain["notice"] is None
        document = server.http.get("/openapi.json").json()
        fields = document["components"]["schemas"]["SearchResult"]["properties"]
        assert fields["method"]["enum"] == ["fts", "substring"] and "notice" in fields
    finally:
        server.close()
    # The same file under a SQLite with FTS5: ranked, and nothing to say.
    store = Store(db)
    hits = Library(store).search("language", fts=True)
    assert hits.full_text and hits.fallback is None and len(hits) == 2
    store.close()


def test_an_open_connection_with_fts5_sees_writes_made_without_it(db_path):
    """Two programs on one file (a server with FTS5, a CLI without): neither fails, and the
    index is rebuilt before the one with FTS5 reads it, so it never answers stale."""
    with_fts = Library(Store(db_path))
    with_fts.add("https://a.example", title="Alpha")
    with without_fts5():
        without = Library(Store(db_path))
    without.add("https://b.example", title="Bravo")
    hits = with_fts.search("bravo")
    assert [hit.bookmark.title for hit in hits] == ["Bravo"] and hits.full_text
    # The index is back with its triggers: the connection without FTS5 must not fire them.
    without.update(1, title="Alpha changed")
    assert without.search("changed").fallback == FULL_TEXT_MISSING
    assert [hit.bookmark.id for hit in with_fts.search("changed")] == [1]
    without.store.close()
    with_fts.store.close()


def test_an_older_file_migrates_without_fts5_and_gets_its_index_later(db_path):
    """A file an older marks left at schema 2, with its index of then, opened without FTS5."""
    import apsw

    old = apsw.Connection(str(db_path))
    for sql in schema.MIGRATIONS[:2]:
        old.execute(sql)
    old.execute("INSERT INTO bookmarks (url, url_key, title, added) VALUES "
                "('https://a.example/', 'https://a.example/', 'Ancient page', "
                "'2020-01-01T00:00:00Z')")  # fmt: skip
    old.execute("PRAGMA user_version = 2")
    old.close()
    with without_fts5():
        store = Store(db_path)
        Library(store).add("https://b.example", title="Newer page")
        assert store.value("PRAGMA user_version") == schema.VERSION
        store.close()
    store = Store(db_path)
    assert sorted(hit.bookmark.id for hit in Library(store).search("page", fts=True)) == [1, 2]
    assert [hit.bookmark.id for hit in Library(store).search("ancie*", fts=True)] == [1]
    store.close()


def test_the_index_triggers_are_the_ones_the_store_watches(library):
    """A migration that adds a trigger to the index must name it in schema.FULL_TEXT_TRIGGERS:
    the store drops and counts exactly those."""
    tables = {*schema.FULL_TEXT_TABLES}
    triggers = {
        name
        for name, sql in library.store.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'"
        )
        if any(f"INTO {table} " in sql or f"INTO {table}\n" in sql for table in tables)
    }
    assert triggers == set(schema.FULL_TEXT_TRIGGERS)


with without_fts5():
    NO_FTS5 = Library(Store(":memory:"))
NO_FTS5.add("https://a.example", title="a b", tags=["a/b"])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='ab "*()#:-_%\\ORNDTtiley', max_size=40))
def test_any_query_without_fts5_searches_or_fails_cleanly(query):
    try:
        hits = NO_FTS5.search(query, fts=True)
    except Invalid as error:  # bad syntax: one line, as with FTS5
        assert "\n" not in str(error)
    else:
        assert hits.fallback == FULL_TEXT_MISSING
