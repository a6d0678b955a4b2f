"""marks shell at 100,000 bookmarks, 5,000 tags and 2,000 domains: `cd` and `ls` of every kind
of directory, and start-up (as a `-c` command and to the first interactive prompt). `marks` runs
with its modules byte-compiled, as a user's install has them (bytecode.py)."""

import datetime as dt
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import compile_marks
from marks import importing
from marks.library import Library, Record
from marks.shell import Session, run_line
from marks.shell.commands import Commands
from marks.store import Store
from run import Row

MARKS = str(Path(sys.executable).with_name("marks"))
NOW = dt.datetime(2026, 11, 18, 10, 30, tzinfo=dt.UTC)
DIRECTORIES = [
    "/",
    "/bookmarks",
    "/bookmarks/5000",
    "/tags",
    "/tags/topic7",
    "/tags/topic7/sub1107",
    "/starred",
    "/archived",
    "/unread",
    "/popular",
    "/broken",
    "/untagged",
    "/pdfs",
    "/queue",
    "/domains",
    "/domains/site42.example.org",
    "/recent",
    "/recent/this-week/visited",
    "/recent/last-month/added",
    "/by-date/added",
    "/by-date/added/2024",
    "/by-date/added/2024/05",
    "/by-date/added/2024/05/17",
]


def build(path: Path) -> None:
    rng = random.Random(5)
    tags = [f"topic{n}" for n in range(100)] + [f"topic{n % 100}/sub{n}" for n in range(100, 5000)]
    start = dt.datetime(2021, 11, 18, tzinfo=dt.UTC)
    records = []
    for number in range(100_000):
        added = start + dt.timedelta(seconds=rng.randrange(5 * 365 * 86400))
        visits = int(rng.paretovariate(1.3)) - 1 if rng.random() < 0.4 else 0
        visited = NOW - dt.timedelta(seconds=rng.randrange(120 * 86400)) if visits else None
        records.append(
            Record(
                url=f"https://site{number % 2000}.example.org/{number}"
                + (".pdf" if number % 97 == 0 else ""),
                title=f"Page {number} about {rng.choice(tags)}",
                tags=rng.sample(tags, rng.randint(0, 3)),
                starred=rng.random() < 0.05,
                archived=rng.random() < 0.03,
                added=added,
                last_visited=visited,
                visit_count=visits,
                reachable=None if rng.random() < 0.5 else rng.random() > 0.02,
            )
        )
    library = Library(Store(path))
    importing.import_records(library, records)
    library.store.close()


def run() -> list[Row]:
    compile_marks()
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "library.db"
        build(db)
        store = Store(db)
        session = Session(
            Library(store), write=lambda text: None, confirm=lambda q: False, now=lambda: NOW
        )
        commands = Commands(session)
        assert session.library.count() == 100_000
        assert store.value("SELECT count(*) FROM tags") == 5000
        slowest_cd = (0.0, "")
        for path in DIRECTORIES:
            cd, ls = [], []
            for _ in range(5):
                begin = time.perf_counter()
                assert run_line(commands, f"cd {path}", print), path
                cd.append(time.perf_counter() - begin)
                begin = time.perf_counter()
                assert run_line(commands, "ls", print), path
                ls.append(time.perf_counter() - begin)
            rows.append(Row(f"shell ls {path}", statistics.median(ls) * 1000, "ms", 100))
            slowest_cd = max(slowest_cd, (statistics.median(cd) * 1000, path))
        rows.append(Row(f"shell cd, slowest directory ({slowest_cd[1]})", slowest_cd[0], "ms", 100))
        store.close()
        env = {**os.environ, "XDG_STATE_HOME": directory, "XDG_CONFIG_HOME": directory}
        starts = []
        for _ in range(7):
            begin = time.perf_counter()
            subprocess.run(
                [MARKS, "--db", str(db), "shell", "-c", "pwd"],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
            )
            starts.append(time.perf_counter() - begin)
        rows.append(
            Row("shell start-up: `marks shell -c pwd`", statistics.median(starts) * 1000, "ms", 300)
        )
        rows.append(
            Row("shell start-up: to the first prompt", _first_prompt(db, env) * 1000, "ms", 300)
        )
    return rows


def _first_prompt(db: Path, env: dict) -> float:
    import pexpect

    samples = []
    for _ in range(5):
        begin = time.perf_counter()
        child = pexpect.spawn(
            MARKS,
            ["--db", str(db), "shell"],
            encoding="utf-8",
            timeout=20,
            env={**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"},
        )
        child.expect("marks:/>")
        samples.append(time.perf_counter() - begin)
        child.sendline("exit")
        child.expect(pexpect.EOF)
    return statistics.median(samples)
