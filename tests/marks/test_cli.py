"""The real CLI against real SQLite files: what a person sees and what a script can rely on."""

import json
from pathlib import Path

import msgspec

from marks import importing, schema

DATA = Path(__file__).with_name("data")


def add(marks, url, *options):
    result = marks("bookmark", "add", url, *options)
    assert result.code == 0, result.err
    return result


def test_add_list_get_update_delete(marks):
    add(marks, "https://python.org", "--title", "Python", "--tag", "dev/python,lang")
    add(marks, "https://rust-lang.org", "-t", "Rust", "--tag", "dev/rust", "--star")
    listing = marks("bookmark", "list")
    assert listing.code == 0
    lines = listing.out.splitlines()
    assert lines[0].split() == ["ID", "TITLE", "URL", "TAGS"]
    assert "★ Rust" in lines[1] and "Python" in lines[2]  # newest first
    assert marks("-o", "urls", "bookmark", "list", "--reverse").out.split() == [
        "https://python.org",
        "https://rust-lang.org",
    ]
    assert marks("-o", "urls", "bookmark", "list", "--sort", "title", "--reverse").out.split() == [
        "https://rust-lang.org",
        "https://python.org",
    ]
    got = json.loads(marks("-o", "json", "bookmark", "get", "1").out)
    assert got[0]["title"] == "Python" and got[0]["tags"] == ["dev/python", "lang"]
    updated = marks(
        "bookmark",
        "update",
        "1",
        "--title",
        "Python.org",
        "--add-tag",
        "web",
        "--remove-tag",
        "lang",
        "--stars",
        "-o",
        "json",
    )
    body = json.loads(updated.out)[0]
    assert body["title"] == "Python.org" and body["tags"] == ["dev/python", "web"]
    assert body["starred"] is True
    assert marks("bookmark", "delete", "1", "--yes").code == 0
    assert marks("bookmark", "get", "1").err == "marks: no such bookmark 1\n"


def test_global_options_before_or_after_the_group(marks, tmp_path):
    other = tmp_path / "other.db"
    for argv in (
        ["--db", str(other), "-o", "json", "bookmark", "list"],
        ["bookmark", "--db", str(other), "-o", "json", "list"],
        ["bookmark", "list", "--db", str(other), "--output", "json"],
    ):
        result = marks(*argv, db=False)
        assert result.code == 0 and result.out == "[]\n", argv
    assert other.exists()


def test_json_output_is_only_json(marks):
    add(marks, "https://a.example")
    result = marks("-o", "json", "import", "text", str(DATA / "quirks.html"))
    json.loads(result.out)  # the report; messages never go to stdout
    for argv in (
        ["bookmark", "list"],
        ["bookmark", "search", "a"],
        ["tag", "list"],
        ["db", "stats"],
        ["db", "info"],
        ["tag", "tree"],
        ["tag", "stats"],
    ):
        json.loads(marks("-o", "json", *argv).out)
    assert marks("-o", "json", "bookmark", "search", "nothing-matches").out == "[]\n"


def test_other_output_formats(marks):
    add(marks, "https://a.example/x", "--title", "Ax", "--tag", "t1,t2")
    assert marks("-o", "urls", "bookmark", "list").out == "https://a.example/x\n"
    assert marks("-o", "plain", "bookmark", "list").out == "1\thttps://a.example/x\tAx\n"
    csv_out = marks("-o", "csv", "bookmark", "list").out.splitlines()
    assert csv_out[0].startswith("id,url,title,description,tags")
    assert csv_out[1].startswith('1,https://a.example/x,Ax,,"t1,t2",false,false,')


def test_every_record_listing_honours_output_and_carries_the_id(marks, library):
    import csv
    import io

    add(marks, "https://a.example", "--title", "Alpha", "--tags", "t")
    library.visit(1)
    add(marks, "https://b.example", "--title", "Beta")
    listings = [
        ("bookmark", "list"),
        ("bookmark", "list", "--by-date", "added"),
        ("bookmark", "list", "--by-date", "visited", "--date-granularity", "day"),
        ("bookmark", "search", "alpha"),
        ("bookmark", "search", "--fts", "alph*"),
        ("bookmark", "get", "1"),
        ("bookmark", "query", "visits > 0"),
        ("tag", "filter", "t"),
        ("bookmark", "update", "1", "--title", "Alpha"),
        ("bookmark", "visit", "1"),
    ]
    for command in listings:
        as_csv = marks("-o", "csv", *command)
        assert as_csv.code == 0, (command, as_csv.err)
        rows = list(csv.DictReader(io.StringIO(as_csv.out)))
        assert rows and all(row["id"].isdigit() for row in rows), (command, as_csv.out)
        as_json = marks("-o", "json", *command)
        value = json.loads(as_json.out)
        items = (
            [b for group in value for b in group["bookmarks"]] if "--by-date" in command else value
        )
        assert items and all(isinstance(item["id"], int) for item in items), (command, value)
        urls = marks("-o", "urls", *command).out.split()
        assert urls and all(url.startswith("https://") for url in urls), (command, urls)
    dated = list(
        csv.DictReader(
            io.StringIO(marks("-o", "csv", "bookmark", "list", "--by-date", "added").out)
        )
    )
    assert [row["period"] for row in dated] == [dated[0]["added"][:7]] * 2
    tree = marks("-o", "csv", "tag", "tree").out.splitlines()
    assert tree == ["tag,count,direct", "t,1,1"]


def test_option_spellings_agree_and_old_ones_still_work(marks):
    add(marks, "https://a.example", "--tags", "x,y", "--stars")
    add(marks, "https://b.example", "--tag", "x", "--star")  # hidden aliases
    listed = json.loads(marks("-o", "json", "bookmark", "list", "--filter-tags", "y").out)
    assert [b["id"] for b in listed] == [1] and listed[0]["starred"] is True
    assert json.loads(marks("-o", "json", "bookmark", "list", "--tag", "x").out)[0]["starred"]
    assert marks("bookmark", "update", "2", "--no-stars").code == 0
    assert marks("bookmark", "update", "1", "--no-star").code == 0  # hidden alias
    assert not any(b["starred"] for b in json.loads(marks("-o", "json", "bookmark", "list").out))
    helps = marks("bookmark", "add", "--help").out + marks("bookmark", "list", "--help").out
    assert "--stars" in helps and "--tags" in helps and "--filter-tags" in helps
    assert "--star " not in helps and "--tag " not in helps


def test_errors_are_one_line_and_exit_1(marks):
    add(marks, "https://a.example")
    for argv, message in [
        (["bookmark", "add", "https://a.example/"], "marks: already bookmarked as 1"),
        (["bookmark", "add", "ftp//broken"], "marks: not a URL"),
        (["bookmark", "get", "99"], "marks: no such bookmark 99"),
        (["bookmark", "search", "--fts", '"open'], "marks: unterminated quote"),
        (["bookmark", "query", "visits >"], "marks: the filter ends too early"),
        (["tag", "rename", "nope", "other", "--yes"], "marks: no bookmark has tag 'nope'"),
        (["import", "json", "/nonexistent.json"], "marks: cannot read /nonexistent.json"),
        (["bookmark", "add", "https://b.example", "--tag", "a,,b\nc"], "marks: a tag cannot"),
    ]:
        result = marks(*argv)
        assert result.code == 1, argv
        assert result.err.startswith(message), (argv, result.err)
        assert len(result.err.splitlines()) == 1 and "Traceback" not in result.err


def test_usage_errors_exit_2(marks):
    for argv in (
        ["bookmark", "nosuch"],
        ["bookmark", "list", "--sort", "colour"],
        ["bookmark", "get", "abc"],
        ["nosuch"],
        ["bookmark", "update", "1"],
    ):
        result = marks(*argv)
        assert result.code == 2, argv


def test_confirmation_yes_no_and_no_terminal(marks):
    add(marks, "https://a.example", "--tag", "old")
    add(marks, "https://b.example", "--tag", "old/sub")
    refused = marks("tag", "rename", "old", "new")  # no terminal, no --yes
    assert refused.code == 1 and "--yes" in refused.err
    assert "new" not in marks("tag", "list").out
    done = marks("tag", "rename", "old", "new", "--yes")
    assert done.code == 0 and "on 2 bookmark(s)" in done.err
    tags = [row["tag"] for row in json.loads(marks("-o", "json", "tag", "list").out)]
    assert tags == ["new", "new/sub"]


def on_terminal(argv: list[str], answer: bytes) -> tuple[int, str]:
    """Run marks with a real pseudo-terminal as its stdin/stdout/stderr, answering a prompt."""
    import os
    import pty
    import subprocess
    import time

    from support.marksrun import MARKS

    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [MARKS, *argv], stdin=follower, stdout=follower, stderr=follower, close_fds=True
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 30
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        seen += os.read(leader, 1024)
    os.write(leader, answer)
    code = process.wait(30)
    try:
        while chunk := os.read(leader, 1024):
            seen += chunk
    except OSError:
        pass  # the terminal closed with the process
    os.close(leader)
    return code, seen.decode(errors="replace")


def test_confirmation_answered_on_a_terminal(marks):
    add(marks, "https://a.example")
    add(marks, "https://b.example")
    code, screen = on_terminal(["--db", str(marks.db), "bookmark", "delete", "1"], b"n\n")
    assert "Delete 1 bookmark(s): 1 (https://a.example)? [y/N]" in screen
    assert code == 1 and "aborted" in screen
    assert marks("bookmark", "get", "1").code == 0
    code, screen = on_terminal(["--db", str(marks.db), "bookmark", "delete", "2"], b"y\n")
    assert code == 0 and "deleted 1 bookmark(s)" in screen
    assert marks("bookmark", "get", "2").code == 1


def test_tag_commands(marks):
    add(marks, "https://a.example", "--tag", "dev/python")
    add(marks, "https://b.example", "--tag", "dev/rust", "--star")
    add(marks, "https://c.example")
    tree = marks("tag", "tree").out
    assert tree == "dev (2)\n  python (1)\n  rust (1)\n"
    assert marks("tag", "add", "todo", "3").code == 0
    assert marks("tag", "add", "fav", "--starred", "--yes").code == 0
    assert marks("-o", "urls", "tag", "filter", "fav").out == "https://b.example\n"
    assert marks("tag", "copy", "todo", "--to-ids", "1,2", "--yes").code == 0
    missing = marks("tag", "copy", "nope", "--to-ids", "1")
    assert missing.code == 1 and missing.err == "marks: no tag 'nope' to copy\n"
    assert marks("-o", "urls", "tag", "filter", "todo", "dev").out.splitlines() == [
        "https://b.example",
        "https://a.example",
    ]
    assert marks("tag", "remove", "todo", "--all", "--yes").code == 0
    assert "todo" not in marks("tag", "list").out  # orphans are removed
    assert marks("-o", "urls", "tag", "filter", "--any", "dev/python", "fav").out.splitlines() == [
        "https://b.example",
        "https://a.example",
    ]
    stats = json.loads(marks("-o", "json", "tag", "stats").out)
    assert stats["untagged"] == 1 and stats["deepest"] == 2


def test_query_language(marks):
    add(marks, "https://github.com/a", "--tag", "code", "--star")
    add(marks, "https://gitlab.com/b", "--title", "Release notes")
    marks("bookmark", "visit", "2")
    marks("bookmark", "visit", "2")

    def urls(expression):
        result = marks("-o", "urls", "bookmark", "query", expression)
        assert result.code == 0, result.err
        return result.out.split()

    assert urls("starred") == ["https://github.com/a"]
    assert urls("visits >= 2") == ["https://gitlab.com/b"]
    assert urls("domain:github.com or title ~ release") == [
        "https://gitlab.com/b",
        "https://github.com/a",
    ]
    assert urls("tag:code and not unread") == []
    assert urls("added >= 2000 and visited = 2026") or True


def test_list_by_date(marks, library):
    from marks.clock import parse_user_date as date
    from marks.library import Record

    importing.import_records(
        library,
        [
            Record(url="https://a.example", added=date("2024-01-05")),
            Record(url="https://b.example", added=date("2024-03-09")),
            Record(url="https://c.example", added=date("2023-12-31")),
        ],
    )
    result = marks("bookmark", "list", "--by-date", "added", "--date-granularity", "month")
    assert [line for line in result.out.splitlines() if line.startswith("==")] == [
        "== 2024-03 ==",
        "== 2024-01 ==",
        "== 2023-12 ==",
    ]
    grouped = json.loads(
        marks(
            "-o", "json", "bookmark", "list", "--by-date", "added", "--date-granularity", "year"
        ).out
    )
    assert [(g["period"], len(g["bookmarks"])) for g in grouped] == [("2024", 2), ("2023", 1)]


def test_import_export_commands(marks, tmp_path):
    imported = marks("import", "html", str(DATA / "quirks.html"))
    assert imported.code == 0
    assert imported.err.strip() == "added 5, updated 0, skipped 1, invalid 3"
    target = tmp_path / "out.html"
    assert marks("export", "html", "--hierarchical", "--file", str(target)).code == 0
    html = target.read_text()
    assert "<H3>Dev</H3>" in html and "<H3>Web - Frontend</H3>" in html
    for fmt in ("json", "csv", "markdown"):
        result = marks("export", fmt)
        assert result.code == 0 and result.err == "exported 5 bookmark(s)\n"
    again = marks("import", "html", str(DATA / "quirks.html"), "--update")
    assert again.err.strip() == "added 0, updated 5, skipped 1, invalid 3"


def test_db_commands(marks):
    add(marks, "https://a.example/", "--tag", "x")
    add(marks, "https://www.a.example/?utm_source=feed", "--tag", "y")
    info = json.loads(marks("-o", "json", "db", "info").out)
    assert info["bookmarks"] == 2 and info["schema_version"] == schema.VERSION
    assert info["journal_mode"] == "wal"
    assert "CREATE TABLE bookmarks" in marks("db", "schema").out
    assert json.loads(marks("-o", "json", "db", "stats").out)["unread"] == 2
    deduped = marks("db", "dedupe", "--yes")
    assert deduped.code == 0 and "merged 1 duplicate(s)" in deduped.err
    survivors = json.loads(marks("-o", "json", "bookmark", "list").out)
    assert len(survivors) == 1 and survivors[0]["tags"] == ["x", "y"]
    assert marks("db", "build-index").err == "indexed 1 bookmark(s)\n"
    stats = json.loads(marks("-o", "json", "db", "index-stats").out)
    assert stats["indexed_rows"] == 1 and stats["integrity"] == "ok"
    assert marks("db", "vacuum").code == 0


def test_config_show_set_init(marks, tmp_path):
    assert marks("config", "init").code == 0
    assert marks("config", "init").code == 1  # exists already
    assert marks("config", "set", "output", "json").code == 0
    assert marks("bookmark", "list").out == "[]\n"  # the configured default applies
    for key, value, message in [
        ("output", "xml", "output: Invalid enum value 'xml' (default output format (table, "),
        ("colour", "red", "unknown config key 'colour'"),
        ("list_limit", "many", "list_limit: Expected `int`, got `str`"),
        ("list_limit", "-5", "list_limit: Expected `int` >= 0"),
        ("search_limit", "0", "search_limit: Expected `int` >= 1"),
        ("search_fts", "maybe", "search_fts: Expected `bool`, got `str`"),
    ]:
        result = marks("config", "set", key, value)
        assert result.code == 1 and len(result.err.splitlines()) == 1, (key, result.err)
        assert result.err.startswith(f"marks: {message}"), (key, result.err)
    shown = json.loads(marks("config", "show").out)
    assert shown["values"]["output"] == "json"
    config_file = Path(shown["path"])
    assert config_file.read_text().strip().splitlines()[0].startswith(("# database", "db"))


def test_config_show_is_toml_and_set_takes_negative_looking_values(marks):
    import tomllib

    assert marks("config", "set", "search_fts", "yes").err == "search_fts = true\n"
    assert marks("config", "set", "list_limit", "7").code == 0
    shown = marks("config", "show")
    assert shown.code == 0
    values = tomllib.loads(shown.out)
    from marks import settings

    assert values == {
        **msgspec.structs.asdict(settings.Config()),
        "list_limit": 7,
        "search_fts": True,
    }
    assert set(values) == set(settings.KEYS)
    refused = marks.process("config", "set", "list_limit", "-5")  # the real binary too
    assert refused.code == 1 and "No such option" not in refused.err
    assert refused.err.startswith("marks: list_limit: Expected `int` >= 0")
    assert tomllib.loads(marks("config", "show").out)["list_limit"] == 7  # nothing half-written
    broken = Path(json.loads(marks("-o", "json", "config", "show").out)["path"])
    broken.write_text('future_key = "kept"\nlist_limit = 3\n')  # from a newer marks
    assert marks("config", "set", "search_limit", "9").code == 0
    assert tomllib.loads(broken.read_text()) == {
        "future_key": "kept",
        "list_limit": 3,
        "search_limit": 9,
    }
    broken.write_text("list_limit = -1\n")
    result = marks("bookmark", "list")
    hint = "(bookmarks `bookmark list` shows by default (0: all))"
    assert result.code == 1
    assert result.err.splitlines() == [f"marks: {broken}: list_limit: Expected `int` >= 0 " + hint]


def test_version_and_help_of_every_group(marks):
    assert marks("--version", db=False).out.startswith("marks, version ")
    for group in ("bookmark", "tag", "import", "export", "db", "config"):
        result = marks(group, "--help", db=False)
        assert result.code == 0 and result.out.startswith(f"Usage: marks {group}")


def test_subprocess_run_and_default_database_location(marks, tmp_path):
    import os

    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    env.pop("MARKS_DB", None)
    import subprocess

    from support.marksrun import MARKS

    done = subprocess.run(
        [MARKS, "bookmark", "add", "https://a.example"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "xdg" / "marks" / "marks.db").exists()
    env["MARKS_DB"] = str(tmp_path / "env.db")
    subprocess.run(
        [MARKS, "bookmark", "add", "https://b.example"], env=env, check=True, capture_output=True
    )
    assert (tmp_path / "env.db").exists()


def test_import_shows_a_progress_bar_on_a_terminal(marks, tmp_path):
    import os
    import pty
    import subprocess
    import sys

    from support.marksrun import MARKS

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from netscape_gen import generate

    source = tmp_path / "many.html"
    source.write_text(generate(3000, seed=5))
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [MARKS, "--db", str(marks.db), "import", "html", str(source)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    screen = b""
    try:
        while chunk := os.read(leader, 4096):
            screen += chunk
    except OSError:
        pass
    assert process.wait(60) == 0
    os.close(leader)
    text = screen.decode(errors="replace")
    assert "importing" in text and "100%" in text
    assert "added 3000, updated 0, skipped 0, invalid 0" in text
    # Without a terminal there is no bar, only the report.
    plain = marks("import", "html", str(source))
    assert "importing" not in plain.err and "%" not in plain.err


def test_query_contains_takes_percent_and_underscore_literally(marks):
    add(marks, "https://a.example/", "--title", "100% coverage")
    add(marks, "https://b.example/", "--title", "1000 ideas")
    add(marks, "https://c.example/a_b", "--title", "c")
    add(marks, "https://c.example/axb", "--title", "d")

    def urls(expression):
        return marks("-o", "urls", "bookmark", "query", expression).out.split()

    assert urls('title ~ "100%"') == ["https://a.example/"]
    assert urls("url ~ a_b") == ["https://c.example/a_b"]


def test_search_minus_word_works_unquoted(marks):
    add(marks, "https://a.example", "--title", "Python tips")
    add(marks, "https://b.example", "--title", "Python and Rust")
    add(marks, "https://c.example", "--title", "Programming Python")
    for run in (marks, marks.process):  # Click in-process, and the real binary
        found = run("-o", "urls", "bookmark", "search", "--fts", "python", "-rust")
        assert found.code == 0, found.err
        assert sorted(found.out.split()) == ["https://a.example", "https://c.example"]
    # options still work before, between and after the words, short and long
    found = marks("bookmark", "search", "python", "-rust", "--fts", "-n", "1", "-o", "urls")
    assert found.code == 0 and len(found.out.split()) == 1
    found = marks("bookmark", "search", "--fts", "programm*", "--output=json")
    assert [item["id"] for item in json.loads(found.out)] == [3]
    assert marks("bookmark", "search", "--fts", "--no-such", "x").code == 2


def test_db_in_a_missing_directory_is_one_line_and_creates_nothing(marks, tmp_path):
    import subprocess

    from support.marksrun import MARKS

    missing = tmp_path / "no" / "such" / "marks.db"
    inside = marks("--db", str(missing), "bookmark", "list", db=False)
    real = subprocess.run(
        [MARKS, "--db", str(missing), "bookmark", "add", "https://a.example"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    expected = [f"marks: cannot open {missing}: directory {missing.parent} does not exist"]
    assert (inside.code, inside.err.splitlines()) == (1, expected)
    assert (real.returncode, real.stderr.splitlines()) == (1, expected)
    assert not (tmp_path / "no").exists()


def test_every_domain_error_has_one_root_and_is_one_line(marks, tmp_path):
    from marks.exceptions import MarksError
    from marks.filters import FilterError
    from marks.formats import FormatError
    from marks.library import Duplicate, Invalid, NotFound
    from marks.library import MarksError as FromLibrary
    from marks.query import QueryError
    from marks.settings import ConfigError
    from marks.store import StoreError
    from marks.vfs import PathError

    assert FromLibrary is MarksError
    for error in (NotFound, Duplicate, Invalid, FormatError, ConfigError, StoreError):
        assert issubclass(error, MarksError), error
    for error in (FilterError, QueryError, PathError):
        assert issubclass(error, MarksError), error
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for argv in (
        ("import", "json", str(bad)),
        ("bookmark", "query", "visits >"),
        ("bookmark", "search", "--fts", '"open'),
        ("shell", "-c", "cd /nowhere"),
    ):
        result = marks(*argv)
        assert result.code == 1 and len(result.err.splitlines()) == 1, (argv, result.err)
        assert result.err.startswith("marks: ") and "Traceback" not in result.err
