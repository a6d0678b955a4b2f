"""No N+1: listings and the shell's directories run a bounded number of SQL statements whatever
the page size. APSW's exec tracer counts every statement the program sends to SQLite. The same
statements, planned as for a million bookmarks (support.plans), read through indexes."""

import contextlib

from marks.library import Library
from marks.shell import run_script
from marks.shell.commands import Session
from marks.store import Store
from support.plans import NOW, fill, million_shaped, problems


@contextlib.contextmanager
def counted(store: Store):
    statements: list[tuple[str, tuple]] = []

    def trace(cursor, sql, bindings) -> bool:
        statements.append((sql, bindings or ()))
        return True

    store.db.exec_trace = trace
    try:
        yield statements
    finally:
        store.db.exec_trace = None


def statements_for(library: Library, action) -> int:
    with counted(library.store) as statements:
        action(library)
    return len(statements)


def shell(script: str):
    def run(library: Library) -> None:
        errors: list[str] = []
        session = Session(library, write=lambda text: None, confirm=lambda q: True, now=lambda: NOW)
        assert run_script(session, script, errors.append) == 0, errors

    return run


ACTIONS = {
    "list": lambda library: library.list_bookmarks(limit=None),
    "list by tag": lambda library: library.list_bookmarks(tags=["topic"]),
    "get many": lambda library: library.get_many(range(1, library.count() + 1)),
    "search": lambda library: library.search("page", fts=True, limit=None),
    "prefix search": lambda library: library.search("pag* -#area1", fts=True, limit=None),
    "tag counts": lambda library: library.tag_counts(),
    "ls /": shell("ls /"),
    "ls -l /tags": shell("ls -l /tags"),
    "ls -la /tags/topic": shell("ls -la /tags/topic"),
    "ls -a /bookmarks": shell("ls -a /bookmarks"),
    "ls -l /domains": shell("ls -l /domains"),
    "ls /by-date/added": shell("ls /by-date/added"),
    "ls /recent/this-month/added": shell("ls -a /recent/this-month/added"),
    "grep": shell("cd /starred; grep Page title"),
    "find": shell("cd /tags/topic; find page"),
    "which": shell("which 3"),
}


def test_statement_counts_do_not_grow_with_the_library(tmp_path):
    libraries = []
    for size in (12, 240, 240):
        library = Library(Store(tmp_path / f"{size}-{len(libraries)}.db"))
        fill(library, size)
        libraries.append(library)
    million_shaped(libraries[2].store)  # planned as for a million: other plans, same statements
    for name, action in ACTIONS.items():
        small, large, million = (statements_for(library, action) for library in libraries)
        assert small == large == million, (name, small, large, million)
        assert small <= 12, (name, small)
    for library in libraries:
        library.store.close()


# What reads every bookmark or every tag link by its nature: the whole listing, all tags with
# their counts, every bookmark below a directory (find's scope). They still read through an index;
# nothing else may scan or sort everything.
WHOLE = {
    "list",
    "list by tag",
    "get many",
    "tag counts",
    "ls -l /tags",
    "ls -la /tags/topic",
    "find",
}


def test_statements_planned_for_a_million_read_only_what_they_need(tmp_path):
    library = Library(Store(tmp_path / "library.db"))
    fill(library, 240)
    million_shaped(library.store)
    found = {}
    for name, action in ACTIONS.items():
        with counted(library.store) as statements:
            action(library)
        for sql, bindings in statements:
            if sql.lstrip().upper().startswith(("SELECT", "WITH")) and name not in WHOLE:
                bad = problems(library.store, sql, bindings)
                if bad:
                    found[name] = (sql, bad)
    library.store.close()
    assert found == {}
