"""Short commands load only what they use.

At a million bookmarks `bookmark list` and the shell's `ls` are mostly Python starting and
importing (README, "A million bookmarks"): a module they never call must not be imported, and
`ls /broken` once loaded the whole link checker (aiohttp, asyncio, ssl: 150 ms) to read the last
checks. Each command runs in a new interpreter, as `marks` does, shows what it shows, and reports
the modules it loaded.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marks.library import Library

RUN = """
import json, os, sys
from marks.cli import main
sys.argv = ["marks", *sys.argv[1:]]
try:
    main()
finally:
    with open(os.environ["LOADED_MODULES"], "w") as handle:
        json.dump(sorted(sys.modules), handle)
"""

# Never needed to list bookmarks or directories: the interactive shell's terminal library, the
# HTTP client of the link checker, and marks' own modules for searching, checking and adding.
NEVER = {
    "prompt_toolkit",
    "aiohttp",
    "asyncio",
    "marks.cli.health",
    "marks.linkcheck",
    "marks.urls",
}
SEARCH = {"marks.search", "marks.query"}


def loaded(db: Path, tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", RUN, "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LOADED_MODULES": str(report)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, set(json.loads(report.read_text()))


@pytest.fixture
def sample(library: Library, db_path: Path) -> Path:
    library.add("https://example.org/kept", title="Kept", tags=["dev/python"])
    gone = library.add("https://gone.example.net/page", title="Gone")
    library.store.execute("UPDATE bookmarks SET reachable = 0 WHERE id = ?", (gone.id,))
    return db_path


def test_bookmark_list_loads_neither_search_nor_the_checker(sample, tmp_path):
    shown, modules = loaded(sample, tmp_path, "bookmark", "list", "--limit", "50")
    assert "Kept" in shown and "Gone" in shown
    assert not modules & (NEVER | SEARCH | {"marks.health"}), sorted(modules & (NEVER | SEARCH))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "unread/ (2)"),
        ("/unread", "Gone"),
        ("/broken", "Gone"),
        ("/tags", "dev/"),
        ("/domains", "gone.example.net/"),
        ("/by-date", "added/"),
    ],
)
def test_ls_loads_no_terminal_ui_nor_http_client_nor_search(sample, tmp_path, path, expected):
    shown, modules = loaded(sample, tmp_path, "shell", "-c", f"ls {path}")
    assert expected in shown
    assert not modules & (NEVER | SEARCH), sorted(modules & (NEVER | SEARCH))


def test_a_tag_directory_loads_the_tag_rules_it_needs(sample, tmp_path):
    shown, modules = loaded(sample, tmp_path, "shell", "-c", "ls /tags/dev/python")
    assert "Kept" in shown
    assert "marks.search" in modules  # the tag clauses live there; the check above is not vacuous
    assert not modules & NEVER, sorted(modules & NEVER)


def test_a_command_loaded_on_use_is_listed_and_runs(marks):
    # `bookmark health` lives in its own module, imported when run or when help lists it.
    listed = marks("bookmark", "--help", db=False).out
    assert "health" in listed and "Check that bookmarked links still work" in " ".join(
        listed.split()
    )
    assert "Exit status: 0" in marks("bookmark", "health", "--help", db=False).out
    assert marks("bookmark", "health", "--dry-run").code == 0
