"""marks: `import chrome --history` and `import firefox --history` of 100,000 bookmarks with
200,000 history rows, as whole commands in their own processes (time, CPU and peak memory)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import browser_gen
from run import Row

MARKS = str(Path(sys.executable).with_name("marks"))
BOOKMARKS, HISTORY = 100_000, 200_000

# Runs the command in a child and prints wall seconds, CPU seconds and the child's peak RSS (MB).
MEASURE = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024)\n"
)


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], check=True, capture_output=True, text=True, env=env
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def run() -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="marks-bench-browsers-") as directory:
        home = Path(directory) / "home"
        browser_gen.chrome_profile(home / ".config/google-chrome/Default", BOOKMARKS, HISTORY)
        browser_gen.firefox_profile(home / ".mozilla/firefox/bench.default", BOOKMARKS, HISTORY)
        (home / ".mozilla/firefox/profiles.ini").write_text(
            "[Profile0]\nName=bench\nIsRelative=1\nPath=bench.default\nDefault=1\n"
        )
        os.sync()  # the generator's 100+ MB are written back now, not during the measurement
        env = {
            **os.environ,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(Path(directory) / "config"),
        }
        for browser, memory_target in (("chrome", 300), ("firefox", None)):
            db = Path(directory) / f"{browser}.db"
            seconds, cpu, peak = measure(
                [MARKS, "--db", str(db), "import", browser, "--history"], env
            )
            label = f"import {browser} --history 100k bookmarks, 200k history"
            rows.append(Row(label, seconds, "s", 10))
            rows.append(Row(f"import {browser}: CPU time", cpu, "s"))
            rows.append(Row(f"import {browser}: peak memory", peak, "MB", memory_target))
    return rows
