"""Short commands load only what they use.

At a million bookmarks `bookmark list` and the shell's `ls` are mostly Python starting and
importing (README, "A million bookmarks"): a module they never call must not be imported, and
`ls /broken` once loaded the whole link checker (aiohttp, asyncio, ssl: 150 ms) to read the last
checks. Each command runs in a new interpreter through `marks.program`, as `marks` does, shows
what it shows, and reports the modules it loaded.
"""

import gc
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marks.library import Library

MARKS = str(Path(sys.executable).with_name("marks"))

# The report is written at exit by an `atexit` function: the program runs those before it leaves
# (it may leave with `os._exit`, so a `finally` after `main()` would never run).
RUN = """
import atexit, os, sys

def report():
    loaded = sorted(sys.modules)
    import json
    with open(os.environ["LOADED_MODULES"], "w") as handle:
        json.dump(loaded, handle)

atexit.register(report)
from marks.program import main
sys.argv = ["marks", *sys.argv[1:]]
main()
"""

# Never needed to list bookmarks or directories: the interactive shell's terminal library, the
# HTTP client of the link checker, and marks' own modules for searching, checking and adding;
# platformdirs on Linux (marks.userdirs computes the XDG directories) with the `tempfile`,
# `shutil` and `random` it loads.
NEVER = {
    "prompt_toolkit",
    "aiohttp",
    "asyncio",
    "marks.cli.health",
    "marks.linkcheck",
    "marks.urls",
    "platformdirs",
    "tempfile",
    "shutil",
    "random",
    # pathlib with the `urllib.parse`, `ipaddress` and `fnmatch` it imports (17 M instructions):
    # the config, the library file and the plugin index are named as text (marks.paths).
    "pathlib",
    "urllib.parse",
    "ipaddress",
    "fnmatch",
    # `graph build`'s arrays (360 M instructions and 20 MB to import): loaded by the build only.
    "numpy",
}
SEARCH = {"marks.search", "marks.query"}
JSON = {"json"}  # 5 M instructions: the count of tags and the search language use it
# About 4 million instructions of start-up per class, and `dataclasses` itself: the CLI's state,
# the shell's session and the vfs are plain classes and named tuples, and the link checker's
# options and summary (`ls /broken` reads the last checks through marks.health) msgspec Structs.
DATACLASSES = {"dataclasses"}


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
    unwanted = NEVER | SEARCH | JSON | DATACLASSES | {"marks.health"}
    assert not modules & unwanted, sorted(modules & unwanted)


def test_bookmark_list_loads_no_other_group_nor_locale_nor_the_journal(sample, tmp_path):
    # Click looks its help and version options' words up in `gettext` as it makes them, and the
    # first lookup imports `locale` (5 million instructions): marks makes those two options.
    shown, modules = loaded(sample, tmp_path, "bookmark", "list", "--limit", "50")
    assert "Kept" in shown
    assert "locale" not in modules
    # The undo journal and the trash's rows: only what changes bookmarks records into them.
    assert not modules & {"marks.journal", "marks.trashrows", "marks.dependents"}
    groups = {name for name in modules if name.startswith("marks.cli.")}
    assert groups == {"marks.cli.bookmark", "marks.cli.output", "marks.cli.edge"}


LEAVE = """
import atexit, sys, threading
from marks.program import leave

atexit.register(lambda: print("atexit ran"))
print("the command's output")
"""


def test_the_program_leaves_after_flushing_and_running_atexit(tmp_path):
    # `leave` skips the interpreter's teardown of every module with `os._exit`: first what the
    # ordinary exit would still do that anyone can see, and the exit status.
    done = subprocess.run(
        [sys.executable, "-c", LEAVE + "leave(3)"], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (3, "the command's output\natexit ran\n")


def test_the_program_waits_for_a_running_thread(tmp_path):
    # A thread still working when the command returns finishes (the ordinary exit joins it).
    script = LEAVE + (
        "go = threading.Event()\n"
        "def work():\n"
        "    go.wait()\n"
        "    print('the thread finished', flush=True)\n"
        "threading.Thread(target=work).start()\n"
        "go.set()\n"
        "leave(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "the thread finished" in done.stdout and "atexit ran" in done.stdout


def test_the_program_leaves_no_open_library_behind(library, db_path):
    # A connection left open (not a command's: those are closed when it ends) is closed by the
    # ordinary exit, so SQLite's -wal and -shm files go with it.
    library.store.close()
    script = LEAVE + (
        "from marks.store import Store\n"
        f"store = Store({str(db_path)!r})\n"
        "store.execute('CREATE TABLE written_at_exit (x)')\n"
        f"print('open:', sorted(p.name for p in Path({str(db_path.parent)!r}).iterdir()))\n"
        "leave(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "from pathlib import Path\n" + script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{db_path.name}-wal" in done.stdout  # while the connection was open
    assert sorted(path.name for path in db_path.parent.glob(db_path.name + "*")) == [db_path.name]


def test_the_program_lets_a_plugins_unclosed_file_be_written(tmp_path):
    # Third-party code may leave a file written and not closed: its buffer reaches the file only
    # through the ordinary exit's finalization, which a process that loaded a plugin keeps.
    (tmp_path / "sloppy_plugin.py").write_text(
        f"handle = open({str(tmp_path / 'written.txt')!r}, 'w')\n"
        "handle.write('every line the plugin wrote')\n"
        "class Plugin:\n    pass\n"
    )
    script = LEAVE + (
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from marks import plugins\n"
        "plugins._load('sloppy_plugin:Plugin')\n"
        "leave(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "written.txt").read_text() == "every line the plugin wrote"


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
    unwanted = NEVER | SEARCH | JSON | DATACLASSES
    assert not modules & unwanted, sorted(modules & unwanted)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("shell", "-c", "ls /"), "unread/ (2)"),
        (("bookmark", "list", "-n", "50"), "Kept"),
        (("-o", "plain", "bookmark", "list"), "Kept"),
    ],
)
def test_a_short_option_loads_neither_locale_nor_difflib(sample, tmp_path, args, expected):
    # Click tries `-c` as a long option first, and the miss's error looks its message up in
    # `gettext` (importing `locale`) and its "did you mean" in `difflib` (8 M instructions):
    # marks' parser reads an argument that can only be short options as short options at once.
    shown, modules = loaded(sample, tmp_path, *args)
    assert expected in shown
    assert not modules & {"locale", "difflib"}, sorted(modules & {"locale", "difflib"})


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


def test_the_console_script_is_the_program():
    # `marks.program` keeps the garbage collector out of start-up and exit (about 37 million
    # instructions of `bookmark list`); `marks.cli:main` runs the same commands without that.
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="marks")
    assert script.value == "marks.program:main"


def test_a_command_closes_the_library_file_when_it_ends(sample, library):
    # The program freezes what is left at exit, so nothing would close a connection the
    # garbage collector had to find: SQLite's -wal and -shm files would stay beside the library.
    library.store.close()  # the fixture's own connection
    assert sorted(path.name for path in sample.parent.glob(sample.name + "*")) == [sample.name]
    done = subprocess.run(
        [MARKS, "--db", str(sample), "shell", "-c", "ls /unread; star 1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Gone" in done.stdout
    assert sorted(path.name for path in sample.parent.glob(sample.name + "*")) == [sample.name]


COLLECTIONS = """
import atexit, gc, os, sys

seen = []  # at each collection after `main` began: whether the group's module had loaded whole


def watch(phase, info):
    if phase == "start" and "marks.cli" in sys.modules:
        module = sys.modules.get("marks.cli.bookmark")
        seen.append(module is not None and hasattr(module, "list_"))


def report():
    print("collections while loading:", seen.count(False), file=sys.stderr)
    print("collections in the command:", seen.count(True), file=sys.stderr)


gc.callbacks.append(watch)
atexit.register(report)
from marks.program import main
sys.argv = ["marks", *sys.argv[1:]]
main()
"""


def test_the_collector_stays_off_until_the_command_runs(sample):
    # The group's module loads as Click parses the line (with msgspec, about 30 million
    # instructions of imports): no collection walks what it makes; the command runs with the
    # collector on.
    done = subprocess.run(
        [sys.executable, "-c", COLLECTIONS, "--db", str(sample), "bookmark", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Kept" in done.stdout
    assert "collections while loading: 0" in done.stderr


def test_running_a_command_in_process_leaves_the_collector_alone(marks):
    # Only the program's own process is changed: tests and the server import `marks.cli`.
    frozen = gc.get_freeze_count()
    assert marks("bookmark", "list").code == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen


HELPS = """
import sys
import click
from click.testing import CliRunner
import marks.cli
from marks import __version__
from marks.cli import cli

if sys.argv[1] == "click":  # Click's own help and version options, as marks had them before
    marks.cli.Command.get_help_option = click.Command.get_help_option
    version = click.version_option(__version__, prog_name="marks")(lambda: None)
    at = [param.name for param in cli.params].index("version")
    cli.params[at] = version.__click_params__[0]


def paths(command, path):
    yield path
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            yield from paths(command.get_command(context, name), [*path, name])


runner = CliRunner()
for path in [*paths(cli, []), ["--version"]]:
    for flag in ("--help", "-h") if path != ["--version"] else ("",):
        done = runner.invoke(cli, [*path, flag] if flag else path, prog_name="marks")
        print(f"=== {' '.join(path)} {flag} {done.exit_code}")
        print(done.output, end="")
"""


def helps(which: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", HELPS, which],
        capture_output=True,
        text=True,
        timeout=300,
        env={key: value for key, value in os.environ.items() if key != "COLUMNS"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_help_is_the_help_click_itself_would_print():
    # marks makes the help and version options itself (without Click's `gettext` lookups):
    # every group's and command's help, by `--help` and `-h`, and `--version` print what they
    # print with Click's own options, byte for byte.
    ours = helps("marks")
    assert ours.count("=== ") > 150  # every group and command, twice
    assert ours.count("-h, --help") == ours.count("=== ") - 1  # each help lists the option
    assert "Show the version and exit." in ours and "marks, version " in ours
    assert ours == helps("click")
