"""marks: `graph build` at 10,000 and 100,000 bookmarks and `graph neighbors` at 100,000, as
whole commands (the libraries come from the Netscape generator: folders as tags, real-looking
domains, one folder holding a quarter of everything)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_browsers import measure
from bytecode import compile_marks
from netscape_gen import generate
from run import Row

MARKS = str(Path(sys.executable).with_name("marks"))


def run() -> list[Row]:
    compile_marks()  # `graph neighbors` is timed as a user's install runs it
    rows = []
    with tempfile.TemporaryDirectory(prefix="marks-bench-graph-") as directory:
        env = {**os.environ, "XDG_CONFIG_HOME": str(Path(directory) / "config")}
        for count, target_s, target_mb in ((10_000, 3, None), (100_000, 30, 500)):
            size = f"{count // 1000}k"
            source = Path(directory) / f"{size}.html"
            source.write_text(generate(count, seed=count + 1))
            db = Path(directory) / f"{size}.db"
            subprocess.run(
                [MARKS, "--db", str(db), "import", "html", str(source)],
                check=True,
                capture_output=True,
                env=env,
            )
            seconds, cpu, peak = measure([MARKS, "--db", str(db), "graph", "build"], env)
            rows.append(Row(f"graph build {size} bookmarks", seconds, "s", target_s))
            rows.append(Row(f"graph build {size}: CPU time", cpu, "s"))
            rows.append(Row(f"graph build {size}: peak memory", peak, "MB", target_mb))
            if count == 100_000:
                rows.append(
                    Row("graph neighbors at 100k (whole command)", _neighbors(db, env), "ms", 150)
                )
    return rows


def _neighbors(db: Path, env: dict[str, str], runs: int = 9) -> float:
    times = []
    for n in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [MARKS, "--db", str(db), "graph", "neighbors", str(1 + n * 9_000)],
            check=True,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000
