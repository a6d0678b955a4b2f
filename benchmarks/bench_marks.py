"""marks: import, full-text search, start-up and export, as whole commands at 10k and 100k.

`marks` runs with its modules byte-compiled, as a user's install has them (bytecode.py)."""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import compile_marks
from netscape_gen import generate
from run import Row

MARKS = str(Path(sys.executable).with_name("marks"))


def timed(argv: list[str], **kwargs) -> tuple[float, int]:
    """Seconds and the child's peak resident memory (MB) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) // 1024


def median_seconds(argv: list[str], runs: int = 7) -> float:
    return statistics.median(timed(argv)[0] for _ in range(runs))


def run() -> list[Row]:
    compile_marks()
    rows = []
    peaks: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as directory:
        for count in (10_000, 100_000):
            source = Path(directory) / f"bookmarks-{count}.html"
            source.write_text(generate(count, seed=count))
            db = Path(directory) / f"library-{count}.db"
            # A fresh process per measurement: ru_maxrss of children is the largest so far,
            # so the 100k import runs in its own interpreter to report its own peak.
            seconds, peak = _import_in_child(db, source)
            size = f"{count // 1000}k"
            big = count == 100_000
            rows.append(Row(f"import html {size} bookmarks", seconds, "s", 2.5 if big else None))
            rows.append(Row(f"import html {size}: peak memory", peak, "MB", 60 if big else None))
            peaks[count] = peak
            if big:  # imports stream: ten times the bookmarks, (almost) the same peak
                ratio = peaks[100_000] / peaks[10_000]
                rows.append(Row("import html: peak memory 100k / 10k", ratio, "x", 1.2))
            search = median_seconds(
                [MARKS, "--db", str(db), "bookmark", "search", "--fts", "kernel"]
            )
            rows.append(
                Row(
                    f"bookmark search --fts kernel at {size} (whole command)",
                    search * 1000,
                    "ms",
                    250 if big else None,
                )
            )
            export_seconds, _ = timed(
                [
                    MARKS,
                    "--db",
                    str(db),
                    "export",
                    "html",
                    "--hierarchical",
                    "--file",
                    str(source) + ".out",
                ]
            )
            rows.append(
                Row(f"export html --hierarchical {size}", export_seconds, "s", 5 if big else None)
            )
            if big:  # the same library through JSON: what `export json` writes, read back
                exported = Path(directory) / "bookmarks-100000.json"
                timed([MARKS, "--db", str(db), "export", "json", "--file", str(exported)])
                seconds, peak = _import_in_child(
                    Path(directory) / "library-json.db", exported, "json"
                )
                rows.append(Row("import json 100k bookmarks", seconds, "s", 3))
                rows.append(Row("import json 100k: peak memory", peak, "MB", None))
    rows.append(Row("marks --help", median_seconds([MARKS, "--help"], 15) * 1000, "ms", 150))
    return rows


def _import_in_child(db: Path, source: Path, fmt: str = "html") -> tuple[float, int]:
    code = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "print(time.perf_counter() - start, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, MARKS, "--db", str(db), "import", fmt, str(source)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    ).stdout.split()
    return float(out[0]), int(out[1])
