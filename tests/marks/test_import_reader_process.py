"""`marks import FILE` parses in a second process: the same library and report as parsing in the
importing process, the reader's errors as the same one line, and a reader that dies fails the
import with one line and leaves the library as it was."""

import codecs
import datetime as dt
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marks.formats import FormatError
from marks.importchecks import MAX_DESCRIPTION
from marks.importing import BATCH
from marks.library import Library
from marks.store import Store
from marks.transfer import import_file
from support.marksrun import MARKS


def rows(path: Path) -> list[tuple]:
    store = Store(path)
    try:
        bookmarks = store.execute("SELECT * FROM bookmarks ORDER BY id").fetchall()
        tags = store.execute("SELECT * FROM tags ORDER BY id").fetchall()
        links = store.execute("SELECT * FROM bookmark_tags ORDER BY 1, 2").fetchall()
        found = store.execute(
            "SELECT rowid FROM bookmarks_words WHERE bookmarks_words MATCH 'w*' ORDER BY rowid"
        ).fetchall()
        return [bookmarks, tags, links, found]
    finally:
        store.close()


def children(parent: int | None = None) -> set[int]:
    """The processes whose parent is `parent` (this process by default), from /proc: Linux."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.add(int(name))
    return found


NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)


def imported(path: Path, file: Path, separate: bool, **options) -> tuple:
    store = Store(path)
    try:
        library = Library(store, now=lambda: NOW)  # undated entries take the import's time
        report = import_file(library, "auto", str(file), separate=separate, **options)
    except Exception as error:  # the error a front end would show
        return (type(error).__name__, str(error))
    finally:
        store.close()
    return (report, rows(path))


names = st.sampled_from(["w1", "Wörter", "東京", "a, b", " ", "&amp;", "<b>x</b>", "w2/w3"])
dates = st.sampled_from(
    ["", ' ADD_DATE="1500000000"', ' ADD_DATE="1520000000000"', ' ADD_DATE="x"']
)
hrefs = st.sampled_from(
    ["https://a.example/", "https://a.example", "http://b.example/é?q=1", "javascript:x", ""]
)
descriptions = st.sampled_from(["", "<DD>about it\n", "<DD>Wörter &amp; more\n"])
entry = st.tuples(hrefs, dates, names, st.lists(names, max_size=2), descriptions).map(
    lambda e: f'<DT><A HREF="{e[0]}"{e[1]} TAGS="{",".join(e[3])}">{e[2]}</A>\n{e[4]}'
)
folder = names.map(lambda name: f"<DT><H3>{name}</H3>\n<DL><p>\n")
documents = st.lists(entry | folder | st.just("</DL><p>\n"), max_size=30).map(
    lambda parts: "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n" + "".join(parts)
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=documents,
    encoding=st.sampled_from(["utf-8", "cp1252", "utf-16"]),
    update=st.booleans(),
)
def test_the_reader_process_gives_the_same_library_and_report(tmp_path, document, encoding, update):
    file = tmp_path / "in.html"
    data = document.encode(encoding, errors="replace")
    if encoding == "utf-16":
        data = codecs.BOM_UTF16_LE + document.encode("utf-16-le")
    file.write_bytes(data)
    results = []
    for separate in (False, True):
        db = tmp_path / f"{separate}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        first = imported(db, file, separate)
        again = imported(db, file, separate, update=update)  # merges into the first
        results.append((first, again))
    assert results[0] == results[1]


@pytest.mark.parametrize("separate", [False, True])
def test_every_description_is_kept_and_capped_in_either_process(tmp_path, separate):
    """A link's <DD> follows it: the entry that ends a batch of the import (or of the reader's
    messages) keeps its description, and an overlong description is cut and said."""
    count = 2 * BATCH + 1
    long = "y" * (MAX_DESCRIPTION + 10)
    links = "".join(
        f'<DT><A HREF="https://d.example/{n}" ADD_DATE="1500000000">t{n}</A>\n'
        f"<DD>about {n}{long if n == 7 else ''}\n"
        for n in range(1, count + 1)
    )
    file = tmp_path / "described.html"
    file.write_text(f"<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n{links}</DL>\n")
    report, (bookmarks, *_) = imported(tmp_path / "d.db", file, separate)
    descriptions = {row[1]: row[4] for row in bookmarks}  # url: description
    assert len(descriptions) == count
    for n in range(1, count + 1):
        if n != 7:
            assert descriptions[f"https://d.example/{n}"] == f"about {n}"
    assert descriptions["https://d.example/7"] == ("about 7" + long)[:MAX_DESCRIPTION]
    assert report.repaired == 1
    assert report.problems == [
        f"line 15: repaired (description of {MAX_DESCRIPTION + 17} characters cut to "
        f'{MAX_DESCRIPTION}): https://d.example/7 "t7"'
    ]


def test_charset_warnings_cross_from_the_reader_process(library, tmp_path):
    file = tmp_path / "win.html"
    file.write_bytes(b'<DL><DT><A HREF="https://win.example/">\x93Quoted\x94 \x80</A></DL>')
    report = import_file(library, "html", str(file), separate=True)
    assert report.added == 1
    assert any("Windows-1252" in warning for warning in report.warnings)
    assert library.store.value("SELECT title FROM bookmarks") == "\u201cQuoted\u201d \u20ac"


@pytest.mark.parametrize(
    ("fmt", "content", "error"),
    [
        ("html", b"just words, not bookmarks\n", "not a Netscape bookmark file"),
        ("csv", b"url,title\nhttps://ok.example,\xff\xfe\n", "is not UTF-8 text"),
        ("text", b"https://ok.example\n\xc3\x28 broken\n", "is not UTF-8 text"),
    ],
)
def test_a_reader_error_in_the_second_process_is_the_same_one_line(
    marks, tmp_path, fmt, content, error
):
    assert marks("bookmark", "add", "https://seed.example", "--tag", "seed").code == 0
    before = rows(marks.db)
    file = tmp_path / f"bad.{fmt}"
    file.write_bytes(content)
    store = Store(marks.db)
    messages = []
    for separate in (False, True):
        with pytest.raises(FormatError) as raised:
            import_file(Library(store), fmt, str(file), separate=separate)
        messages.append(str(raised.value))
    store.close()
    assert messages[0] == messages[1] and error in messages[0]
    # The real command, as a user runs it: the same line, nothing else, nothing written.
    result = marks.process("import", fmt, str(file))
    assert result.code == 1
    assert result.err == f"marks: {messages[0]}\n"
    assert rows(marks.db) == before


def test_a_failing_import_stops_its_reader_process(library, tmp_path):
    file = tmp_path / "many.html"
    links = "".join(f'<DT><A HREF="https://e{n}.example/">e{n}</A>\n' for n in range(20_000))
    file.write_text(f"<DL><p>\n{links}</DL>\n")
    before = children()

    def interrupted(done: int, total: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C while records arrive

    with pytest.raises(KeyboardInterrupt):
        import_file(library, "html", str(file), progress=interrupted, separate=True)
    assert children() == before  # killed and reaped: no process left behind
    assert library.store.value("SELECT count(*) FROM bookmarks") == 0


def test_a_reader_process_killed_mid_import_fails_it_and_changes_nothing(marks, tmp_path):
    assert marks("bookmark", "add", "https://seed.example", "--tag", "seed").code == 0
    before = rows(marks.db)
    fifo = tmp_path / "bookmarks.html"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [MARKS, "--db", str(marks.db), "import", "html", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with open(fifo, "wb") as writer:
            # A byte-order mark names the charset, so the reader streams (no check pass first).
            writer.write(codecs.BOM_UTF8 + b"<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n")
            for n in range(12_000):  # some 1 MB: several batches have reached the importer
                writer.write(f'<DT><A HREF="https://e{n}.example/">w{n}</A>\n'.encode())
            writer.flush()
            reader = _child_of(process.pid)
            os.kill(reader, signal.SIGKILL)
            # The file is not finished: the importer must not take what it got for all of it.
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert err == (
        f"marks: the process reading {fifo} was killed (SIGKILL) before its end; nothing imported\n"
    )
    assert out == ""
    assert rows(marks.db) == before


def _child_of(pid: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = children(pid)
        if found:
            return min(found)
        time.sleep(0.02)
    raise AssertionError("the import started no reader process")
