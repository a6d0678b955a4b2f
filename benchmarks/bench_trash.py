"""marks: the trash and undo at 10,000 bookmarks, as whole commands (issue 25, item 5):
`bookmark delete` of all of them (into the trash with their tags and queue entries) and the
`marks undo` that puts them back."""

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netscape_gen import generate
from run import Row

MARKS = str(Path(sys.executable).with_name("marks"))
COUNT = 10_000
RUNS = 3


def seconds(argv: list[str]) -> tuple[float, float]:
    """Wall-clock seconds of one command, and the CPU seconds it used (user and system): on a
    machine other work keeps busy, the second says what the command itself costs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "bookmarks.html"
        source.write_text(generate(COUNT, seed=COUNT))
        db = Path(directory) / "library.db"
        marks = [MARKS, "--db", str(db)]
        subprocess.run([*marks, "import", "html", str(source)], check=True, capture_output=True)
        ids = [str(i) for i in range(1, COUNT + 1)]
        subprocess.run([*marks, "queue", "add", *ids[:1000]], check=True, capture_output=True)
        deletes, undos = [], []
        for _ in range(RUNS):
            deletes.append(seconds([*marks, "bookmark", "delete", *ids, "--yes"]))
            undos.append(seconds([*marks, "undo"]))
        check = subprocess.run(
            [*marks, "db", "stats", "-o", "json"], check=True, capture_output=True, text=True
        )
        assert f'"bookmarks":{COUNT}' in check.stdout.replace(" ", ""), check.stdout

    def median(runs: list[tuple[float, float]], which: int) -> float:
        return statistics.median(run[which] for run in runs)

    return [
        Row(f"bookmark delete of {COUNT:,} into the trash (whole command)",
            median(deletes, 0), "s", 3),
        Row(f"bookmark delete of {COUNT:,}: CPU time", median(deletes, 1), "s"),
        Row(f"marks undo of a {COUNT:,}-bookmark delete (whole command)",
            median(undos, 0), "s", 1),
        Row(f"marks undo of a {COUNT:,}-bookmark delete: CPU time", median(undos, 1), "s"),
    ]  # fmt: skip
