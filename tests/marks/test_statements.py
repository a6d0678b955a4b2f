"""No N+1: listings and the shell's directories run a bounded number of SQL statements whatever
the page size. APSW's exec tracer counts every statement the program sends to SQLite."""

import contextlib
import datetime as dt

from marks import importing
from marks.library import Library, Record
from marks.shell import run_script
from marks.shell.commands import Session
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


@contextlib.contextmanager
def counted(store: Store):
    statements: list[str] = []

    def trace(cursor, sql, bindings) -> bool:
        statements.append(sql)
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
    for size in (12, 240):
        library = Library(Store(tmp_path / f"{size}.db"))
        fill(library, size)
        libraries.append(library)
    for name, action in ACTIONS.items():
        small, large = (statements_for(library, action) for library in libraries)
        assert small == large, (name, small, large)
        assert small <= 12, (name, small)
    for library in libraries:
        library.store.close()
