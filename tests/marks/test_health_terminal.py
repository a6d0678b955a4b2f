"""`marks bookmark health` on a real terminal: the progress bar, and Ctrl-C keeping results."""

import os

import pexpect
import pytest

from marks.library import Library
from marks.store import Store
from support.marksrun import MARKS
from support.websites import Websites


@pytest.fixture
def web():
    with Websites(hosts=3, slow_seconds=30) as sites:
        yield sites


def spawn(db_path, tmp_path, *args) -> pexpect.spawn:
    env = {
        **os.environ,
        "TERM": "xterm",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "COLUMNS": "100",
    }
    return pexpect.spawn(
        MARKS,
        ["--db", str(db_path), "bookmark", "health", *args],
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 100),
    )


def test_progress_bar_and_summary(db_path, tmp_path, web):
    library = Library(Store(db_path))
    for number in range(30):
        library.add(web.url(f"/ok?n={number}", host=1 + number % 3))
    library.store.close()
    child = spawn(db_path, tmp_path, "--timeout", "5")
    child.expect("checking")
    child.expect("100%")
    child.expect(r"checked 30 of 30 link\(s\)")
    child.expect(r"ok\s+30")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_ctrl_c_stops_cleanly_and_keeps_results(db_path, tmp_path, web):
    library = Library(Store(db_path))
    for number in range(12):
        library.add(web.url(f"/ok?n={number}", host=2))
    for number in range(4):
        library.add(web.url(f"/slow?n={number}", host=3))
    library.store.close()
    child = spawn(db_path, tmp_path, "--timeout", "60", "--retries", "0")
    child.expect("checking")
    child.expect("75%")  # the 12 fast links are done; the 4 slow ones hang
    child.sendintr()
    child.expect(r"interrupted after checking 12 of 16 link\(s\)")
    child.expect("marks: interrupted")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 or child.signalstatus is not None
    store = Store(db_path)
    assert store.value("SELECT count(*) FROM health_checks") == 12
    assert store.value("SELECT count(*) FROM bookmarks WHERE reachable = 1") == 12
    assert store.value("SELECT count(*) FROM bookmarks WHERE last_checked IS NULL") == 4
