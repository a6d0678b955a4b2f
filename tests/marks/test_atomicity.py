"""All or nothing: malformed files change nothing, and neither does a crash mid-import."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from marks import schema
from marks.library import Library
from marks.store import Store, StoreError
from support.marksrun import MARKS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from netscape_gen import generate


def snapshot(path: Path) -> list[tuple]:
    store = Store(path)
    try:
        rows = store.execute("SELECT id, url, title, tags, added FROM bookmarks ORDER BY id")
        return rows.fetchall()
    finally:
        store.close()


@pytest.fixture
def seeded(marks):
    for number in range(3):
        assert marks("bookmark", "add", f"https://seed{number}.example", "--tag", "seed").code == 0
    return snapshot(marks.db)


@pytest.mark.parametrize(
    ("fmt", "content", "message"),
    [
        ("html", b"just some words, not bookmarks at all\n", "not a Netscape bookmark file"),
        # A UTF-16 byte-order mark is honoured: the text it announces is not bookmarks.
        ("html", b"\xff\xfe<DL>\x00\x81 binary", "not a Netscape bookmark file"),
        ("json", b'"a string"', "found a string"),
        ("json", b'{"url": ', "not valid JSON"),
        ("json", b'{"just": "an object"}', "expected a JSON array"),
        ("csv", b"name,notes\nx,y\n", "no URL column"),
        ("csv", b"url,title\nhttps://ok.example,\xff\xfe\n", "is not UTF-8 text"),
        ("text", b"https://ok.example\n\xc3\x28 broken utf-8\n", "is not UTF-8 text"),
    ],
)
def test_malformed_files_give_one_line_and_change_nothing(
    marks, seeded, tmp_path, fmt, content, message
):
    path = tmp_path / f"bad.{fmt}"
    path.write_bytes(content)
    result = marks("import", fmt, str(path))
    assert result.code == 1
    assert result.err.startswith("marks: ") and message in result.err
    assert len(result.err.splitlines()) == 1
    assert snapshot(marks.db) == seeded


def test_killed_in_the_middle_of_an_import_leaves_the_database_as_it_was(marks, seeded, tmp_path):
    big = tmp_path / "big.html"
    big.write_text(generate(150_000, seed=7))
    import subprocess

    process = subprocess.Popen(
        [MARKS, "--db", str(marks.db), "import", "html", str(big)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wal = Path(str(marks.db) + "-wal")
    deadline = time.monotonic() + 60
    # Wait until the import is writing (the write-ahead log grows), then kill it outright.
    while time.monotonic() < deadline and (not wal.exists() or wal.stat().st_size < 4_000_000):
        time.sleep(0.02)
    assert process.poll() is None, "the import finished before it could be interrupted"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert snapshot(marks.db) == seeded
    store = Store(marks.db)
    assert store.value("PRAGMA integrity_check") == "ok"
    store.execute("INSERT INTO bookmarks_fts (bookmarks_fts, rank) VALUES ('integrity-check', 1)")
    assert Library(store).search("seed", fts=True)
    store.close()


def test_older_database_is_migrated_and_newer_refused(tmp_path):
    empty = tmp_path / "old.db"
    import apsw

    apsw.Connection(str(empty)).close()  # version 0: nothing in it yet
    store = Store(empty)
    assert store.value("PRAGMA user_version") == schema.VERSION == len(schema.MIGRATIONS)
    store.close()
    newer = tmp_path / "newer.db"
    connection = apsw.Connection(str(newer))
    connection.execute("PRAGMA user_version = 99")
    connection.close()
    with pytest.raises(StoreError, match="newer marks"):
        Store(newer)
