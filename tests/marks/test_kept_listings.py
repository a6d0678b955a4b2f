"""What the shell's top-level listings read from kept tables (schema 14) stays what a direct
reading of the library gives, after any sequence of writes: adds, edits, visits, tag changes,
deletes, undo, imports (new and merged)."""

import datetime as dt

import apsw
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from marks import importing, schema, trash, vfs
from marks.exceptions import MarksError
from marks.library import Library, Record
from marks.listing import Filesystem
from marks.shell import Session, run_script
from marks.store import Store
from support.oldschema import before_14

NOW = dt.datetime(2026, 11, 26, 12, tzinfo=dt.UTC)
# Roots that fold together (`Dev`, `dev`, `DEV`; `Dév`, `dév`: not ASCII, which SQLite's NOCASE
# leaves alone) and ones that do not, so a directory's spelling depends on which tags are left.
SEGMENT = st.sampled_from(["a", "A", "b", "dev", "Dev", "DEV", "Dév", "dév", "x y", "é"])
TAG = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)
TAGS = st.lists(TAG, max_size=3)
ID = st.integers(min_value=1, max_value=5)

HOST = st.sampled_from(["example.com", "www.example.com", "Other.org", "b.example.com"])

OPERATION = st.one_of(
    st.tuples(st.just("add"), HOST, st.integers(0, 20), TAGS, st.booleans()),
    st.tuples(st.just("import"), HOST, st.integers(0, 20), TAGS, st.integers(0, 3)),
    st.tuples(st.just("move"), ID, HOST, st.integers(0, 20)),
    st.tuples(st.just("tag_add"), TAG, st.lists(ID, max_size=3)),
    # A tag the library has (the n-th, in id order), or any tag, for the other tag changes.
    st.tuples(st.just("tag_remove"), st.integers(0, 30) | TAG, st.lists(ID, max_size=3)),
    st.tuples(st.just("tag_rename"), st.integers(0, 30) | TAG, TAG),
    st.tuples(st.just("tag_delete"), st.integers(0, 30) | TAG),
    st.tuples(st.just("retag"), ID, TAGS),
    st.tuples(st.just("visit"), ID),
    st.tuples(st.just("delete"), st.lists(ID, min_size=1, max_size=3)),
    st.tuples(st.just("undo")),
)


def _apply(library: Library, operation: tuple) -> None:
    kind, *args = operation
    try:
        if kind == "add":
            host, number, tags, starred = args
            library.add(f"https://{host}/{number}", tags=tags, starred=starred)
        elif kind == "move":
            bookmark_id, host, number = args
            library.update(bookmark_id, url=f"https://{host}/{number}")
        elif kind == "import":
            host, number, tags, visits = args
            record = Record(
                url=f"https://{host}/{number}",
                tags=tags,
                added=NOW - dt.timedelta(days=number),
                last_visited=NOW if visits else None,
                visit_count=visits,
            )
            importing.import_records(library, [record], update=bool(number % 2))
        elif kind == "tag_add":
            library.tag_add(args[0], _existing(library, args[1]))
        elif kind == "tag_remove":
            library.tag_remove(_tag(library, args[0]), _existing(library, args[1]))
        elif kind == "tag_rename":
            library.tag_rename(_tag(library, args[0]), args[1])
        elif kind == "tag_delete":
            library.tag_delete(_tag(library, args[0]))
        elif kind == "retag":
            library.update(args[0], tags=args[1])
        elif kind == "visit":
            library.visit(args[0])
        elif kind == "delete":
            library.delete(args[0])
        elif kind == "undo":
            trash.undo(library)
    except MarksError:
        pass  # a refused write (no such bookmark, nothing to undo) changes nothing


def _existing(library: Library, ids: list[int]) -> list[int]:
    return [i for i in ids if library.store.value("SELECT 1 FROM bookmarks WHERE id = ?", (i,))]


def _tag(library: Library, which: int | str) -> str:
    if isinstance(which, str):
        return which
    names = [name for (name,) in library.store.execute("SELECT name FROM tags ORDER BY id")]
    return names[which % len(names)] if names else "none"


def _tag_directories(library: Library) -> list[str]:
    """`ls /tags` as it was computed before schema 14: every tag name, in the names'
    case-insensitive order, cut at its first `/`; each directory once by its folded name,
    spelled as the first name spelled it, listed in the order of the folded names."""
    children: dict[str, str] = {}
    for (name,) in library.store.execute("SELECT name FROM tags ORDER BY name COLLATE NOCASE"):
        segment = name.split("/")[0]
        children.setdefault(segment.casefold(), segment)
    return [children[folded] for folded in sorted(children)]


def _shell_ls(library: Library, path: str) -> str:
    out: list[str] = []
    session = Session(library, write=out.append, confirm=lambda _: False, now=lambda: NOW)
    assert run_script(session, f"ls {path}", out.append) == 0
    return "".join(out)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(OPERATION, min_size=1, max_size=14))
def test_the_top_level_tag_directories_follow_every_write(operations):
    store = Store(":memory:")
    try:
        library = Library(store)
        for operation in operations:
            _apply(library, operation)
        expected = _tag_directories(library)
        filesystem = Filesystem(library, now=lambda: NOW)
        at_tags = vfs.resolve("/", "/tags", NOW)
        assert _shell_ls(library, "/tags") == "".join(f"{name}/\n" for name in expected)
        assert filesystem.names(at_tags) == "\n".join(f"{name}/" for name in expected)
        # The entries (completion, `stat`) read the same kept table.
        assert [entry.name for entry in filesystem.listing(at_tags).entries] == expected
        kept = list(store.execute("SELECT root, first FROM tag_roots ORDER BY root"))
        direct = list(store.execute("SELECT root, min(name) FROM tags GROUP BY root ORDER BY root"))
        assert kept == direct
    finally:
        store.close()


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(OPERATION, min_size=1, max_size=14))
@example(  # a visited bookmark leaves with a delete and comes back with undo
    [("add", "example.com", 1, [], False), ("visit", 1), ("delete", [1]), ("undo",)]
)
@example(  # an imported visited bookmark (the import recounts), deleted, then restored
    [("import", "Other.org", 2, [], 2), ("delete", [1]), ("undo",), ("move", 1, "a.example", 3)]
)
def test_the_kept_visit_and_domain_counts_follow_every_write(operations):
    store = Store(":memory:")
    try:
        library = Library(store)
        for operation in operations:
            _apply(library, operation)
        visited, seen, total = store.one(
            "SELECT count(*) FILTER (WHERE visit_count > 0), "
            "count(*) FILTER (WHERE last_visited IS NOT NULL), count(*) FROM bookmarks"
        )
        assert store.one("SELECT visited, seen FROM visit_counts") == (visited, seen)
        domains = list(
            store.execute(
                "SELECT domain, count(*) FROM bookmarks WHERE domain > '' "
                "GROUP BY domain ORDER BY domain"
            )
        )
        assert list(store.execute("SELECT domain, bookmarks FROM domain_counts")) == domains
        # What a person sees: the root's numbers, /domains with and without -l.
        root = _shell_ls(library, "/").splitlines()
        assert f"recent/ ({seen})" in root and f"unread/ ({total - visited})" in root
        assert f"domains/ ({len(domains)})" in root
        assert _shell_ls(library, "/domains") == "".join(f"{d}/\n" for d, _ in domains)
        assert _shell_ls(library, "-l /domains") == "".join(f"d {n:>7}  {d}/\n" for d, n in domains)
    finally:
        store.close()


def test_an_older_library_gains_the_kept_tables_counted_and_keeps_every_row(tmp_path):
    path = tmp_path / "old.db"
    store = Store(path)
    library = Library(store)
    for operation in [
        ("add", "example.com", 1, ["Dev/python", "reading"], False),
        ("add", "www.example.com", 2, ["dev/rust", "Dév"], True),
        ("import", "Other.org", 3, ["dév/x", "a/b"], 2),
        ("import", "b.example.com", 4, [], 0),
        ("visit", 1),
    ]:
        _apply(library, operation)
    expected = (
        _shell_ls(library, "/") + _shell_ls(library, "/tags") + _shell_ls(library, "-l /domains")
    )
    store.close()
    old = apsw.Connection(str(path))
    before_14(old)  # as schema 13 left it
    rows = {
        table: old.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        for table in ("bookmarks", "tags", "bookmark_tags")
    }
    old.close()

    store = Store(path)  # the migration runs
    try:
        library = Library(store)
        assert store.value("PRAGMA user_version") == schema.VERSION
        assert {
            table: store.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("bookmarks", "bookmark_tags")
        } == {table: rows[table] for table in ("bookmarks", "bookmark_tags")}
        assert store.execute("SELECT id, name FROM tags ORDER BY 1").fetchall() == [
            row[:2] for row in rows["tags"]
        ]
        shown = (
            _shell_ls(library, "/")
            + _shell_ls(library, "/tags")
            + _shell_ls(library, "-l /domains")
        )
        assert shown == expected
        assert "Dev/\n" in shown and "dév/\n" not in shown and "Dév/\n" in shown
        assert store.one("SELECT visited, seen FROM visit_counts") == (2, 2)
    finally:
        store.close()
