"""Every shell command through the one-shot mode, on a real library with a fixed clock."""

import contextlib
import datetime as dt
import os
import stat

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marks import importing
from marks.library import Library, Record
from marks.shell import Session, run_line, run_script
from marks.shell.commands import Commands
from marks.shell.lexer import ShellError, parse

UTC = dt.UTC
NOW = dt.datetime(2026, 11, 18, 10, 30, tzinfo=UTC)  # a Wednesday


def t(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def sample(library: Library) -> Library:
    importing.import_records(
        library,
        [
            Record(
                url="https://python.org/",
                title="Python",
                tags=["dev/python"],
                starred=True,
                added=t("2026-11-16T00:00:00"),
                last_visited=t("2026-11-18T09:00:00"),
                visit_count=3,
            ),
            Record(
                url="https://docs.rust-lang.org/book/",
                title="Rust book",
                tags=["dev/rust"],
                added=t("2026-11-15T23:59:59"),
                last_visited=t("2026-11-17T12:00:00"),
                visit_count=1,
            ),
            Record(
                url="https://example.org/paper.pdf",
                title="A paper",
                tags=["reading"],
                added=t("2026-10-31T23:00:00"),
            ),
            Record(
                url="https://news.example/",
                title="News",
                added=t("2026-11-01T00:00:00"),
                reachable=False,
            ),
            Record(
                url="https://www.github.com/x",
                title="Code",
                tags=["dev"],
                archived=True,
                added=t("2025-12-31T23:59:59"),
                last_visited=t("2026-11-10T08:00:00"),
                visit_count=10,
            ),
        ],
    )
    return library


class Shell:
    def __init__(self, library: Library, answers=(), aliases=None) -> None:
        self.out: list[str] = []
        self.errors: list[str] = []
        self.answers = list(answers)
        self.questions: list[str] = []
        self.saved: dict = {}
        self.session = Session(
            library,
            write=self.out.append,
            confirm=self.answer,
            now=lambda: NOW,
            aliases=dict(aliases or {}),
            save_aliases=self.saved.update,
        )

    def answer(self, question: str) -> bool:
        self.questions.append(question)
        return self.answers.pop(0) if self.answers else False

    def __call__(self, script: str) -> str:
        self.out.clear()
        self.errors.clear()
        self.code = run_script(self.session, script, self.errors.append)
        return "".join(self.out)

    def ids(self, script: str) -> list[int]:
        return [
            int(line.split()[0])
            for line in self(script).splitlines()
            if line.split() and line.split()[0].isdigit()
        ]


def test_root_lists_every_directory_with_a_count(sample):
    shell = Shell(sample)
    assert shell("ls").splitlines() == [
        "bookmarks/ (5)",
        "tags/ (4)",
        "starred/ (1)",
        "archived/ (1)",
        "recent/ (3)",
        "domains/ (5)",
        "unread/ (2)",
        "popular/ (3)",
        "broken/ (1)",
        "untagged/ (1)",
        "pdfs/ (1)",
        "queue/ (0)",
        "by-date/",
    ]


def test_the_unread_count_is_every_bookmark_less_the_visited_and_follows_visits(sample):
    # /unread is counted as all bookmarks less the visited (the fewer at a million): the number
    # must stay the one its listing shows, before and after a visit.
    shell = Shell(sample)
    unread = shell.ids("ls /unread")
    assert len(unread) == 2 and "unread/ (2)" in shell("ls /")
    shell(f"visit {unread[0]}")
    assert shell.ids("ls /unread") == unread[1:] and "unread/ (1)" in shell("ls /")
    assert "recent/ (4)" in shell("ls /")


def test_tags_nest_with_subtags_and_bookmarks_together(sample):
    shell = Shell(sample)
    assert shell("ls /tags").splitlines() == ["dev/", "reading/"]
    listing = shell("cd /tags/dev; pwd; ls").splitlines()
    assert listing[0] == "/tags/dev"
    assert listing[1:3] == ["python/", "rust/"] and listing[3].split()[0] == "5"
    assert shell("cd /tags/dev/python; ls").split()[0] == "1"
    assert shell("cd /tags/dev/python/1; pwd") == "/tags/dev/python/1\n"
    shell("cd /tags/dev/python/2")
    assert shell.errors == ["cd: bookmark 2 is not in /tags/dev/python"]
    shell("cd /tags/nothing")
    assert shell.errors == ["cd: no such tag: nothing"]


def test_collections_and_their_filters(sample):
    shell = Shell(sample)
    assert shell.ids("ls /starred") == [1]
    assert shell.ids("ls /archived") == [5]
    assert shell.ids("ls /unread") == [4, 3]
    assert shell.ids("ls /popular") == [5, 1, 2]  # by visit count
    assert shell.ids("ls /broken") == [4]
    assert shell.ids("ls /untagged") == [4]
    assert shell.ids("ls /pdfs") == [3]
    assert shell.ids("ls /domains/github.com") == [5]
    assert shell.ids("ls /domains/www.github.com") == [5]
    # Names alone, as in /tags; `ls -l` counts each domain's bookmarks.
    assert shell("ls /domains").splitlines()[0] == "docs.rust-lang.org/"
    long = shell("ls -l /domains").splitlines()
    hosts = ["docs.rust-lang.org", "example.org", "github.com", "news.example", "python.org"]
    assert [line.split() for line in long] == [["d", "1", f"{host}/"] for host in hosts]


def test_recent_periods_with_monday_weeks_and_month_turns(sample):
    shell = Shell(sample)
    assert shell.ids("ls /recent") == [1, 2, 5]  # by last visit
    expectations = {
        "/recent/today/visited": [1],
        "/recent/yesterday/visited": [2],
        "/recent/this-week/visited": [1, 2],
        "/recent/last-week/visited": [5],
        "/recent/this-week/added": [1],  # Monday 00:00:00 belongs to this week
        "/recent/last-week/added": [2],  # Sunday 23:59:59 to the last
        "/recent/this-month/added": [1, 2, 4],  # the 1st at 00:00:00 is this month
        "/recent/last-month/added": [3],
        "/recent/this-week/starred": [1],
        "/recent/today/added": [],
    }
    for path, ids in expectations.items():
        assert shell.ids(f"ls {path}") == ids, path
    assert shell("cd /recent/2; pwd") == "/recent/2\n"


def test_by_date(sample):
    shell = Shell(sample)
    assert shell("ls /by-date/added").splitlines() == ["2026/ (4)", "2025/ (1)"]
    assert shell("ls /by-date/added/2026").splitlines() == ["11/ (3)", "10/ (1)"]
    assert shell.ids("ls /by-date/added/2025/12/31") == [5]
    assert shell.ids("ls /by-date/visited/2026/11/18") == [1]


def test_popular_holds_at_most_100(library):
    importing.import_records(
        library, [Record(url=f"https://p{n}.example/", visit_count=n + 1) for n in range(150)]
    )
    shell = Shell(library)
    ids = shell.ids("ls /popular")
    assert len(ids) == 100 and ids[0] == 150 and ids[-1] == 51
    assert "popular/ (100)" in shell("ls /")


def test_cd_pwd_and_relative_paths(sample):
    shell = Shell(sample)
    assert (
        shell("cd tags; cd dev/python; cd ../rust; pwd; cd -; pwd; cd; pwd")
        == "/tags/dev/rust\n/tags/dev/python\n/\n"
    )
    assert shell("cd 3; pwd") == "/bookmarks/3\n"  # a bookmark id is a directory anywhere
    assert shell("cd 3; ls").split()[:3] == ["url", "title", "description"]


def test_which_cat_file_stat(sample):
    shell = Shell(sample)
    paths = shell("which 1").splitlines()
    assert {
        "/bookmarks/1",
        "/tags/dev/python/1",
        "/domains/python.org/1",
        "/starred/1",
        "/popular/1",
        "/by-date/added/2026/11/16/1",
        "/by-date/visited/2026/11/18/1",
    } <= set(paths)
    assert shell("cd 1; cat title") == "Python\n"
    assert shell("cat 2/url") == "https://docs.rust-lang.org/book/\n"
    assert "title = Rust book" in shell("cat 2")
    assert shell("file 3").startswith("3: bookmark, PDF document (https)")
    assert "never checked" in shell("file 3") and "broken" in shell("file 4")
    assert "   marks: 1" in shell("stat /tags/dev")
    shell("cd /; cat title")
    assert shell.errors == ["cat: not in a bookmark (give an id, or cd into one)"]


def test_star_visit_tag_untag(sample):
    shell = Shell(sample, answers=[False, True, True])
    assert shell("cd 3; star") == "3 starred\n"
    assert shell("star 3") == "3 unstarred\n"
    assert shell("visit 3") == "3 visited (1 time(s)): https://example.org/paper.pdf\n"
    assert shell("cd 4; tag later news/daily") == "tagged 1 bookmark(s) with later, news/daily\n"
    # In a directory, tag acts on every bookmark listed there (like a glob), after asking.
    shell("cd /starred; tag work")
    assert (
        shell.errors == ["tag: cancelled, nothing changed"]
        and shell.questions[-1] == "Tag 1 bookmark(s) in /starred?"
    )
    assert shell("cd /bookmarks; tag work") == "tagged 5 bookmark(s) with work\n"
    assert sorted(shell.ids("ls /tags/work")) == [1, 2, 3, 4, 5]
    assert shell("cd /tags/work; untag work") == "removed 5 tag(s)\n"
    assert "work/" not in shell("ls /tags")


def test_mv_renames_a_tag_after_asking(sample):
    shell = Shell(sample, answers=[False, True])
    shell("mv dev code")
    assert shell.errors == ["mv: cancelled, nothing changed"] and "dev/" in shell("ls /tags")
    assert shell("mv dev code") == "renamed 'dev' to 'code' on 3 bookmark(s)\n"
    assert shell("ls /tags/code").splitlines()[:2] == ["python/", "rust/"]


def test_cp_to_this_one_an_id_or_all_here(sample):
    shell = Shell(sample, answers=[True])
    assert shell("cd 4; cp reading .") == "copied 'reading' to 1 bookmark(s)\n"
    assert shell("cp reading 1") == "copied 'reading' to 1 bookmark(s)\n"
    assert shell("cd /tags/dev/rust; cp reading *") == "copied 'reading' to 1 bookmark(s)\n"
    assert sorted(shell.ids("ls /tags/reading")) == [1, 2, 3, 4]
    shell("cd /tags; cp reading .")
    assert shell.errors == ["cp: not in a bookmark (give an id, or cd into one)"]


def test_cp_never_invents_a_tag(sample):
    shell = Shell(sample, answers=[True, True])
    assert shell("cp later 4; cd /tags/dev; cp nosuch *") == ""
    assert shell.errors == [
        "cp: no tag 'later' to copy (`tag later` adds a new one)",
        "cp: no tag 'nosuch' to copy (`tag nosuch` adds a new one)",
    ]
    assert shell.questions == []  # refused before asking
    assert not sample.has_tag("later") and not sample.has_tag("nosuch")
    assert sample.get(4).tags == []


def test_rm_asks_and_leaves_a_deleted_bookmark(sample):
    shell = Shell(sample, answers=[False, True])
    shell("cd 4; rm")
    assert shell.errors == ["rm: cancelled, nothing changed"]
    assert shell("cd 4; rm; pwd") == "deleted 1 bookmark(s)\n/bookmarks\n"
    assert 4 not in shell.ids("ls /bookmarks")


def test_recent_command(sample):
    shell = Shell(sample)
    assert [line.split()[0] for line in shell("recent --limit 2").splitlines()] == ["1", "2"]
    assert [line.split()[0] for line in shell("recent added").splitlines()][:2] == ["1", "2"]
    assert [line.split()[0] for line in shell("recent starred").splitlines()] == ["1"]


def test_find_and_grep_within_the_current_directory(sample):
    shell = Shell(sample)
    assert shell.ids("find python") == [1]
    assert shell.ids("cd /tags/reading; find python") == []
    assert sorted(shell.ids("cd /tags/dev; find rust OR python")) == [1, 2]  # and below
    assert shell.ids(r"cd /; grep '\.pdf$' url") == [3]
    assert shell.ids("cd /tags/dev; grep '^R' title") == [2]
    shell("grep '(' url")
    assert shell.errors[0].startswith("grep: bad pattern")


def test_find_keeps_quoted_phrases_and_prints_one_line_per_bookmark(library):
    library.add("https://a.example", title="Rust book", description="the book about\nrust")
    library.add("https://b.example", title="Book of Rust", description="a\nbook on rust")
    library.add("https://c.example", title="Programming\nin Rust")
    shell = Shell(library)
    assert shell.ids('find "rust book"') == [1]
    assert sorted(shell.ids("find rust book")) == [1, 2]
    assert shell.ids("find 'book of'") == [2]
    assert shell.ids('find title:"book of" -"rust book"') == [2]
    assert shell.ids("find programm*") == [3]
    out = shell("find rust")
    lines = out.splitlines()
    assert len(lines) == 3 and sorted(int(line.split()[0]) for line in lines) == [1, 2, 3]
    assert "Programming in Rust" in out


def test_system_command_runs_to_the_end_of_its_own_command(sample, tmp_path):
    shell = Shell(sample)
    marker = tmp_path / "ran"
    assert shell(f"!echo one; pwd; !touch {marker}; cd /tags; pwd") == "one\n/\n/tags\n"
    assert marker.exists() and shell.errors == []
    assert shell("!echo 'a;b'; pwd") == "a;b\n/tags\n"


def test_messages_say_what_happened(sample):
    shell = Shell(sample)
    shell("cat 42; rm -f 42; star 42; cd /bookmarks/42; cat 1/nosuch; cd /tags; tag x")
    assert shell.errors == [
        "cat: no such bookmark 42",
        "rm: no such bookmark 42",
        "star: no such bookmark 42",
        "cd: no such bookmark 42",
        "cat: no field 'nosuch' (fields: url, title, description, tags, starred, archived, "
        "added, last_visited, visit_count, reachable, last_checked, check_result, archived_url, "
        "archived_at, id)",
        "tag: no bookmarks in /tags",
    ]


def test_rm_refuses_without_a_terminal_unless_forced(sample):
    shell = Shell(sample)
    shell.session.confirm = lambda question: None  # what the CLI gives when stdin is no tty
    shell("rm 4; cd /tags/dev; rm *")
    assert shell.errors == [
        "rm: Delete 4 (News)? -- not asked (no terminal): use rm -f, or marks --yes shell",
        "rm: Delete 1 bookmark(s) in /tags/dev? -- not asked (no terminal): use rm -f, or "
        "marks --yes shell",
    ]
    assert shell("rm -f 4") == "deleted 1 bookmark(s)\n"
    assert shell("cd /tags/dev/rust; rm -f *; pwd") == "deleted 1 bookmark(s)\n/tags/dev\n"


def test_edit_uses_the_editor(sample, tmp_path, monkeypatch):
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "Python home\\n" > "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("EDITOR", str(editor))
    shell = Shell(sample)
    assert shell("cd 1; edit title; cat title") == "1: title changed\nPython home\n"
    tags_editor = tmp_path / "tags.sh"
    tags_editor.write_text('#!/bin/sh\nprintf "dev/python, lang\\n" > "$1"\n')
    tags_editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(tags_editor))
    assert shell("edit tags 1; cat 1/tags") == "1: tags changed\ndev/python, lang\n"


def test_help_tutorial_clear_and_system(sample):
    shell = Shell(sample)
    listing = shell("help")
    for name in (
        "ls",
        "cd",
        "pwd",
        "which",
        "mv",
        "cp",
        "recent",
        "cat",
        "file",
        "stat",
        "star",
        "tag",
        "untag",
        "visit",
        "edit",
        "rm",
        "find",
        "grep",
        "help",
        "history",
        "clear",
        "tutorial",
        "alias",
    ):
        assert f"  {name}" in listing, name
    assert shell("help cd").startswith("cd [PATH|-]")
    assert "Your library is a filesystem" in shell("tutorial")
    assert shell("clear") == "\x1b[2J\x1b[H"
    assert shell("!echo hello from sh") == "hello from sh\n"
    shell("!false")
    assert shell.errors == ["!: exit status 1"]


def test_aliases_expand_and_are_saved(sample):
    shell = Shell(sample)
    shell("alias ll='ls -l' here=pwd")
    assert shell.saved == {"ll": "ls -l", "here": "pwd"}
    assert shell("cd /tags; here") == "/tags\n"
    assert shell("ll /starred").startswith("-       1 ★")
    again = Shell(sample, aliases=shell.saved)
    assert again("alias") == "alias here=pwd\nalias ll='ls -l'\n"
    assert again("unalias here; alias") == "alias ll='ls -l'\n"


def test_errors_print_one_line_and_the_script_goes_on(sample):
    shell = Shell(sample)
    assert shell("nosuch; cd /nowhere; ls -z; pwd") == "/\n"
    assert shell.errors == [
        "nosuch: command not found (try `help`)",
        "cd: no such directory: /nowhere",
        "ls: unknown option -z (use -l, -a)",
    ]
    assert shell.code == 1
    assert shell("pwd; exit; pwd") == "/\n"


lines = (
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "ls",
                    "cd",
                    "pwd",
                    "cat",
                    "file",
                    "stat",
                    "tag",
                    "untag",
                    "mv",
                    "cp",
                    "rm",
                    "find",
                    "grep",
                    "recent",
                    "which",
                    "star",
                    "help",
                    "alias",
                    "unalias",
                    "visit",
                    "..",
                    "/",
                    "/tags/dev",
                    "-l",
                    "*",
                    ".",
                    "1",
                    "999",
                    ";",
                    "'",
                    '"',
                    "\\",
                    "#dev",
                    "--limit",
                    "=",
                    "(",
                    "OR",
                    "-f",
                    "-x",
                    "title",
                    "1/url",
                    "1/nosuch",
                    "prog*",
                    "/tags/dev/python/2",
                    "\ud800",
                ]
            ),
            st.text(st.characters(exclude_characters="!\x00"), max_size=6),
        ),
        max_size=8,
    )
    .map(" ".join)
    .filter(lambda line: not line.lstrip().startswith("!"))
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines)
def test_no_input_escapes_the_shell(sample, line):
    os.environ.pop("EDITOR", None)
    os.environ.pop("VISUAL", None)
    written: list[str] = []
    errors: list[str] = []
    session = Session(sample, write=written.append, confirm=lambda question: True, now=lambda: NOW)
    with contextlib.suppress(ShellError):
        parse(line)
    with contextlib.suppress(EOFError):  # `exit` is the one way out
        run_line(Commands(session), line, errors.append)
    # Every failure is a message about what the person typed: never a bug's traceback or the
    # shell's "unexpected error" net (which names the exception that escaped a command).
    for text in [*errors, *written]:
        assert "unexpected error" not in text and "Traceback" not in text, (line, text)
    for text in errors:
        assert "\n" not in text.strip(), (line, text)


def test_completion_of_commands_paths_tags_and_fields(sample):
    from prompt_toolkit.document import Document

    from marks.shell.completion import ShellCompleter

    session = Session(
        sample,
        write=lambda text: None,
        confirm=lambda q: False,
        now=lambda: NOW,
        aliases={"ll": "ls -l"},
    )
    completer = ShellCompleter(session)

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), None)]

    assert complete("st") == ["star", "stat"]
    assert "ll" in complete("l")
    assert complete("cd /ta") == ["/tags/"]
    assert complete("cd /tags/dev/p") == ["/tags/dev/python/"]
    assert complete("ls /recent/this-") == ["/recent/this-week/", "/recent/this-month/"]
    assert complete("tag dev/") == ["dev/python", "dev/rust"]
    assert complete("mv re") == ["reading"]
    assert complete("edit ti") == ["title"]
    assert complete("grep x vis") == ["visit_count"]
    assert complete("help gr") == ["grep"]
    session.cwd = "/bookmarks/1"
    assert complete("cat ur") == ["url"]
    assert complete("cd /nowhere/x") == []
