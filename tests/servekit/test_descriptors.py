"""Open files: the reserve, and an accept loop out of them that reports once per interval."""

import asyncio
import errno
import logging
import resource
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from servekit import descriptors

OUT_OF_FILES = {
    "message": "socket.accept() out of system resource",
    "exception": OSError(errno.EMFILE, "Too many open files"),
}


@given(st.integers(min_value=0, max_value=1 << 22))
def test_the_reserve_is_a_quarter_of_the_limit_and_at_most_256(limit):
    kept = descriptors.reserve(limit)
    assert 0 <= kept <= 256 and kept <= limit // 4
    assert kept == limit // 4 or kept == 256


def test_this_process_is_not_running_low():
    count = descriptors.open_count()
    assert count is not None and 0 < count < resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert not descriptors.running_low()


_FOLLOW = """
import gc, os
from servekit import descriptors
gc.disable()
before = descriptors.open_count()
listed = len(os.listdir("/proc/self/fd")) - 1
files = [open(os.devnull) for _ in range(100)]
during = descriptors.open_count()
for handle in files:
    handle.close()
print(before, listed, during, descriptors.open_count())
"""


def test_the_count_is_the_open_files_and_follows_them():
    # The count is the whole process's: in the test process a collection of earlier tests'
    # garbage, or a thread they left, may close files between two readings. A fresh
    # interpreter with its collector off holds only what this test opens.
    done = subprocess.run(
        [sys.executable, "-c", _FOLLOW], capture_output=True, text=True, timeout=60, check=True
    )
    before, listed, during, after = map(int, done.stdout.split())
    assert before == listed  # the listing opened one more, which it does not count
    assert during == before + 100
    assert after == before


def test_an_accept_loop_out_of_files_is_reported_once_per_interval(caplog):
    caplog.set_level(logging.WARNING)
    loop = asyncio.new_event_loop()
    passed_on: list[dict] = []
    try:
        loop.set_exception_handler(lambda _, context: passed_on.append(context))
        quiet = descriptors.QuietAccept(loop, interval=3600)
        loop.set_exception_handler(quiet)
        for _ in range(180):  # asyncio retries once a second: three minutes of it
            quiet(loop, OUT_OF_FILES)
        other = {"message": "something else", "exception": ValueError("x")}
        quiet(loop, other)
    finally:
        loop.close()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1, lines
    assert lines[0].startswith("new connections wait: accept() failed (Too many open files;")
    assert passed_on == [other]  # anything else goes to the handler it replaced
