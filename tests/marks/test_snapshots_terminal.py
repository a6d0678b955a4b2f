"""`marks snapshot take` on a real terminal: the progress bar, and Ctrl-C keeping what is done."""

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


def test_progress_bar_then_ctrl_c_keeps_every_snapshot_taken(db_path, tmp_path, web):
    library = Library(Store(db_path))
    for number in range(6):
        library.add(web.url(f"/page/p{number}", host=2))
    for number in range(2):
        library.add(web.url(f"/slow?n={number}", host=3))
    library.store.close()
    config = tmp_path / "config" / "marks"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("health_timeout = 120\n")
    child = pexpect.spawn(
        MARKS,
        ["--db", str(db_path), "snapshot", "take", "--query", "id > 0"],
        env={**os.environ, "TERM": "xterm", "XDG_CONFIG_HOME": str(tmp_path / "config")},
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 100),
    )
    child.expect("snapshotting")
    child.expect("75%")  # the six pages are kept; the two slow ones hang
    child.sendintr()
    child.expect(r"interrupted after 6 of 8 page\(s\) \(kept\)")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 or child.signalstatus is not None
    store = Store(db_path)
    try:
        assert store.value("SELECT count(*) FROM snapshots") == 6
        assert store.value("SELECT count(DISTINCT bookmark_id) FROM snapshots") == 6
    finally:
        store.close()
