"""Imports stream: the peak memory of `marks import` does not grow with the file (the design's
"the same peak at 1,000,000 as at 10,000"). Each import runs as its own process, whose peak
resident size the kernel reports when it is reaped (wait4), so nothing else in the test run
counts.

The bound: a 10x larger file may cost at most 15 MB more. Before imports streamed, these files
cost 74 MB more in HTML and 125 MB more in JSON at 200,000 than at 20,000 bookmarks (0.4 and
0.7 KB per bookmark held); streamed, 3 to 4 MB. What may still grow is bounded by design: SQLite's
page caches (2 MB each for the library and its temporary tables), the tag caches (2048 entries
each), the spooled report lines (1 MiB in memory), a read buffer, a batch of 2,000 rows, and the
allocator's slack.
"""

import os
import sys
from pathlib import Path

import pytest

from support.bookmarkfiles import write_html, write_json

MARKS = str(Path(sys.executable).with_name("marks"))
SMALL, LARGE = 20_000, 200_000
BOUND_MB = 15


def peak_mb(*argv: str) -> float:
    """Run `marks` alone and give its peak resident memory (its own, not any other child's)."""
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
    pid = os.posix_spawn(MARKS, [MARKS, *argv], dict(os.environ), file_actions=devnull)
    _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, argv
    # getrusage gives KiB on Linux and bytes on macOS.
    return usage.ru_maxrss / (2**20 if sys.platform == "darwin" else 1024)


@pytest.mark.parametrize(("fmt", "write"), [("html", write_html), ("json", write_json)])
def test_import_peak_memory_does_not_grow_with_the_file(tmp_path, fmt, write):
    peaks = {}
    for count in (SMALL, LARGE):
        source = write(tmp_path / f"{count}.{fmt}", count)
        db = str(tmp_path / f"{fmt}-{count}.db")
        # --verbose: every undated and repeated entry is a line the import must not hold.
        peaks[count] = peak_mb("--db", db, "import", fmt, str(source), "--verbose")
    growth = peaks[LARGE] - peaks[SMALL]
    assert growth < BOUND_MB, (
        f"{fmt}: {peaks[SMALL]:.0f} MB at {SMALL}, {peaks[LARGE]:.0f} MB at {LARGE}"
    )
