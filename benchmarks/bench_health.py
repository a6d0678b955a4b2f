"""marks link health and page content: whole commands against local servers on 127.0.0.N.

health: 10,000 URLs over 50 hosts at concurrency 100 (>= 1,000 URLs/s, <= 150 MB peak), and
100,000 URLs (<= 250 MB peak); content refresh: 1,000 local pages fetched, extracted, indexed.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from run import Row

MARKS = str(Path(sys.executable).with_name("marks"))
HERE = Path(__file__).parent
HOSTS = 50


def _server() -> tuple[subprocess.Popen, int]:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "websites_server.py"), str(HOSTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        server.kill()
        raise RuntimeError(f"benchmark web server did not start: {line!r}")
    return server, int(line.split()[-1])


def _library(db: Path, urls: list[str]) -> None:
    from marks import importing
    from marks.library import Library, Record
    from marks.store import Store

    store = Store(db)
    records = (Record(url=url, title=f"page {n}") for n, url in enumerate(urls))
    importing.import_records(Library(store), records)
    store.close()


def _measure(argv: list[str], env: dict) -> tuple[float, int, float]:
    """Seconds, peak resident memory (MB) and CPU seconds of one command, in a fresh interpreter.

    The CPU figure says what the command costs on a machine busy with other work (the wall
    time then measures the machine as much as marks)."""
    code = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "took = time.perf_counter() - start\n"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(took, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True
    )
    seconds, peak, cpu = done.stdout.split()
    return float(seconds), int(peak), float(cpu)


def run() -> list[Row]:
    rows = []
    server, port = _server()
    try:
        with tempfile.TemporaryDirectory() as directory:
            env = {**os.environ, "XDG_CONFIG_HOME": directory, "XDG_DATA_HOME": directory}
            for count, target in ((10_000, 150), (100_000, 250)):
                db = Path(directory) / f"health-{count}.db"
                _library(
                    db,
                    [f"http://127.0.0.{1 + n % HOSTS}:{port}/ok?n={n}" for n in range(count)],
                )
                seconds, peak, cpu = _measure(
                    [MARKS, "--db", str(db), "bookmark", "health", "--concurrency", "100"], env
                )
                size = f"{count // 1000}k"
                if count == 10_000:
                    rows.append(
                        Row(f"health {size} URLs / 50 hosts", count / seconds, "URLs/s", 1000, True)
                    )
                    rows.append(
                        Row(f"health {size}: URLs per CPU second of marks", count / cpu, "URLs/s")
                    )
                rows.append(Row(f"health {size} URLs: peak memory", peak, "MB", target))
            db = Path(directory) / "content.db"
            _library(db, [f"http://127.0.0.{1 + n % HOSTS}:{port}/page/p{n}" for n in range(1000)])
            seconds, _, _ = _measure([MARKS, "--db", str(db), "content", "refresh", "--all"], env)
            rows.append(Row("content refresh 1,000 local pages", seconds, "s", 15))
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(30)
    return rows
