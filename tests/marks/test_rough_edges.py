"""Rough edges a new user met (issue 26, item 4), each as the user saw it: help texts that said
what is not so, messages that said more than what changed, tables cut in a pipe, two CSV
formats, health's wording and exit status, shell completion."""

import csv
import datetime as dt
import io
import os
import re

import pexpect
import pytest

from marks import clock, transfer
from marks.library import Library
from marks.store import Store
from support.marksrun import MARKS
from support.websites import Websites

FAST = ("--timeout", "1", "--retries", "0")


@pytest.fixture(scope="module")
def web():
    with Websites(hosts=1) as sites:
        yield sites


def _add(marks, url, *args):
    result = marks("bookmark", "add", url, "--no-fetch", *args)
    assert result.code == 0, result.err


# --- import's help and report --------------------------------------------------------------------


def test_import_help_says_only_strict_refuses_the_whole_file(marks):
    for argv in (["--help"], ["import", "--help"]):
        shown = marks(*argv).out
        assert "all or nothing" not in shown, shown
    assert "--strict refuses the whole file" in " ".join(marks("import", "--help").out.split())
    assert "--strict" in marks("import", "csv", "--help").out


def test_verbose_import_does_not_point_at_verbose(marks, tmp_path):
    path = tmp_path / "spaces.csv"
    path.write_text("url,title\nhttps://a.example/a b,x\n")
    quiet = marks("import", "csv", str(path))
    assert "1 repaired (--verbose lists them)" in quiet.err
    assert marks("bookmark", "delete", "1", "--yes").code == 0
    verbose = marks("import", "csv", str(path), "--verbose")
    assert verbose.code == 0, verbose.err
    assert "--verbose" not in verbose.err and "1 repaired (listed below)" in verbose.err
    assert "repaired (spaces in the URL percent-encoded" in verbose.err


# --- tag reports what changed --------------------------------------------------------------------


def test_tag_add_and_copy_report_only_what_changed(marks):
    for name in "abc":
        _add(marks, f"https://{name}.example/", "--tags", "dev" if name != "a" else "misc")
    added = marks("tag", "add", "dev", "1", "2", "3")
    assert added.err == "tagged 1 bookmark(s) with 'dev', 2 already had it\n"
    again = marks("tag", "add", "dev", "1", "2")
    assert again.err == "nothing changed: 2 bookmark(s) already had 'dev'\n"
    copied = marks("--yes", "tag", "copy", "misc", "--to-ids", "1,2")
    assert copied.err == "copied 'misc' to 1 bookmark(s), 1 already had it\n"
    assert marks("tag", "add", "new", "1").err == "tagged 1 bookmark(s) with 'new'\n"


def test_the_shell_tag_reports_only_what_changed(marks):
    _add(marks, "https://a.example/", "--tags", "dev")
    _add(marks, "https://b.example/")
    had = marks.process("shell", "-c", "cd 1; tag dev")
    assert had.out == "dev: nothing changed, 1 bookmark(s) already had it\n"
    both = marks.process("--yes", "shell", "-c", "cd /bookmarks; tag dev later")
    assert both.out == (
        "tagged 1 bookmark(s) with dev, 1 already had it\ntagged 2 bookmark(s) with later\n"
    )
    fresh = marks.process("--yes", "shell", "-c", "cd /bookmarks; tag new")
    assert fresh.out == "tagged 2 bookmark(s) with new\n"


# --- tables ---------------------------------------------------------------------------------------

LONG = "A title far longer than any terminal is wide " * 5


def test_tables_are_whole_in_a_pipe_and_fit_a_terminal(marks, db_path, tmp_path):
    _add(marks, "https://a.example/" + "p" * 150, "--title", LONG.strip(), "--tags", "t")
    piped = marks.process("bookmark", "list")
    assert piped.code == 0 and LONG.strip() in piped.out and "…" not in piped.out
    assert "https://a.example/" + "p" * 150 in piped.out
    env = {**os.environ, "TERM": "xterm", "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("COLUMNS", None)
    child = pexpect.spawn(
        MARKS,
        ["--db", str(db_path), "bookmark", "list"],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 90),
    )
    child.expect(pexpect.EOF)
    child.close()
    lines = [line for line in child.before.split("\r\n") if line]
    assert len(lines) == 2 and all(len(line) <= 90 for line in lines), lines
    assert "…" in lines[1]


# --- one CSV format -------------------------------------------------------------------------------


def test_list_csv_and_export_csv_are_one_format_marks_imports(marks, tmp_path):
    _add(marks, "https://a.example/", "--title", "A", "--tags", "x,y", "--star")
    _add(marks, "https://b.example/", "--title", "=B")
    listed = marks("-o", "csv", "bookmark", "list").out
    exported = marks("export", "csv").out
    assert listed.splitlines()[0] == exported.splitlines()[0]
    assert listed.splitlines()[0].startswith("id,url,title,description,tags,starred,archived,")
    assert sorted(listed.splitlines()[1:]) == sorted(exported.splitlines()[1:])
    rows = {row["url"]: row for row in csv.DictReader(io.StringIO(listed))}
    a, b = rows["https://a.example/"], rows["https://b.example/"]
    assert (a["id"], a["starred"], a["archived"], a["reachable"]) == ("1", "true", "false", "")
    assert b["title"] == "'=B"
    for name, text in (("listed.csv", listed), ("exported.csv", exported)):
        path = tmp_path / name
        path.write_text(text)
        copy = Library(Store(tmp_path / f"{name}.db"))
        report = transfer.import_file(copy, "csv", str(path))
        assert (report.added, report.invalid) == (2, 0)
        found = {bm.url: bm for bm in copy.iterate()}
        assert found["https://a.example/"].starred and found["https://a.example/"].tags == [
            "x",
            "y",
        ]
        assert found["https://b.example/"].title == "=B"
        copy.store.close()


# --- bookmark health ------------------------------------------------------------------------------


def test_health_says_a_second_failure_is_not_a_first_one(marks, web):
    _add(marks, web.url("/status/404"))
    first = marks("bookmark", "health", *FAST)
    assert first.code == 0, first.err
    assert "not yet confirmed: 1 failed for the first time" in first.out
    second = marks("bookmark", "health", "--force", *FAST)
    assert second.code == 0, second.err
    assert "failed for the first time" not in second.out
    found = re.search(
        r"not yet confirmed: 1 failed again, less than 4 h after their first failure: 1 "
        r"\(a check after (\S+) confirms them\)",
        second.out,
    )
    assert found, second.out
    library = Library(Store(marks.db))
    (since,) = library.store.one(
        "SELECT failing_since FROM health_checks ORDER BY id DESC LIMIT 1", ()
    )
    assert clock.from_text(found.group(1)) == clock.from_text(since) + dt.timedelta(hours=4)


def test_health_exit_status_tells_scripts_about_confirmed_broken_links(marks, web):
    assert "Exit status: 0" in marks("bookmark", "health", "--help").out
    _add(marks, web.url("/ok"))
    assert marks("bookmark", "health", *FAST).code == 0
    _add(marks, web.url("/status/410"))
    unconfirmed = marks("bookmark", "health", *FAST)
    assert unconfirmed.code == 0 and "not yet confirmed: 1" in unconfirmed.out  # no proof yet
    assert marks("config", "set", "health_confirm_hours", "0").code == 0
    broken = marks("bookmark", "health", "--broken", *FAST)
    assert broken.code == 3 and "confirmed broken: 1" in broken.out
    as_json = marks("-o", "json", "bookmark", "health", "--broken", *FAST)
    assert as_json.code == 3 and '"confirmed":true' in as_json.out
    assert marks("bookmark", "health", "--nonsense").code == 2


# --- shell completion -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "expected"),
    [
        ("bash", "complete -o nosort -F _marks_completion marks"),
        ("zsh", "#compdef marks"),
        ("fish", "complete --no-files --command marks"),
    ],
)
def test_completion_scripts_are_produced(shell, expected):
    import subprocess

    done = subprocess.run(
        [MARKS],
        env={**os.environ, "_MARKS_COMPLETE": f"{shell}_source"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and expected in done.stdout, done.stdout + done.stderr


def test_completion_completes_groups_commands_and_options():
    import subprocess

    def complete(words: str, index: int) -> list[str]:
        env = {
            **os.environ,
            "_MARKS_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(index),
        }
        done = subprocess.run([MARKS], env=env, capture_output=True, text=True, timeout=60)
        return done.stdout.split()

    assert "plain,bookmark" in complete("marks book", 1)
    assert "plain,health" in complete("marks bookmark hea", 2)
    assert "plain,--no-access-log" in complete("marks serve --no-acc", 2)
