"""A SQLite without FTS5, for real: the full-text modules are dropped from each APSW connection as
it opens, through APSW's public `apsw.connection_hooks`. marks itself is not changed: it finds
the modules missing as it would on a SQLite built without them.

In this process: `with without_fts5(): ...`. In a process a test starts (`marks serve`):
`env=environment()`, which puts `nofts5_site/sitecustomize.py` on its PYTHONPATH.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import apsw

FULL_TEXT_MODULES = {"fts3", "fts3tokenize", "fts4", "fts4aux", "fts5", "fts5vocab"}
SITE = Path(__file__).with_name("nofts5_site")


def drop_full_text(connection: apsw.Connection) -> None:
    keep = [
        name
        for (name,) in connection.execute("SELECT name FROM pragma_module_list")
        if name not in FULL_TEXT_MODULES
    ]
    connection.drop_modules(keep)


@contextlib.contextmanager
def without_fts5() -> Iterator[None]:
    apsw.connection_hooks.append(drop_full_text)
    try:
        yield
    finally:
        apsw.connection_hooks.remove(drop_full_text)


def environment() -> dict[str, str]:
    """Environment for a child process whose every APSW connection lacks FTS5."""
    paths = [str(SITE), str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(filter(None, paths))}
