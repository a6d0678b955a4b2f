"""marks at a million bookmarks (a lifetime of bookmarks and browser history, see million_gen):
whole commands where a user types them, each a subprocess of the real `marks` against a real
file, a real `marks serve` over loopback and the web UI in Debian's chromium.

The generated file is cached (million_gen.cached), so a rerun starts at the import. Set
MARKS_BENCH_MILLION to another size for a quicker look (the targets stay those of a million).
Latencies are medians of several runs: on a loaded machine single runs say little. `marks` runs
with its modules byte-compiled, as a user's install has them (bytecode.compile_marks: an editable
install without them would compile marks' sources in every run).
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import million_gen
from bench_browsers import measure
from bench_marks_server import _first_render_ms, _latencies, _percentile
from bytecode import compile_marks
from run import Row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.marksserve import start_marks  # noqa: E402

MARKS = str(Path(sys.executable).with_name("marks"))
COUNT = int(os.environ.get("MARKS_BENCH_MILLION") or 1_000_000)
RUNS = 7  # per whole command; the median is reported


class _Rows(list):
    """Rows said on stderr as they come: the whole run takes minutes (the table comes last)."""

    def append(self, row: Row) -> None:
        print(f"  {row.name}: {row.value:.4g} {row.unit}", file=sys.stderr, flush=True)
        super().append(row)

    def __iadd__(self, rows):  # type: ignore[override]
        for row in rows:
            self.append(row)
        return self


def _median_ms(argv: list[str], env: dict[str, str], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _top_directories(db: Path, env: dict[str, str]) -> list[str]:
    """What `ls /` shows: every top-level directory of the shell, as the user sees them."""
    shown = subprocess.run(
        [MARKS, "--db", str(db), "shell", "-c", "ls /"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.split()
    return ["/" + name.strip("/") for name in shown if name.endswith("/")]


def _rare_word(db: Path) -> str:
    """The first tag named like `python1561` (a word and a number: the generator's, a few
    hundred bookmarks each): the word differs with the seed and the size, so it is read."""
    import apsw

    connection = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        found = connection.execute(
            "SELECT name FROM tags WHERE name GLOB '[a-z]*[0-9]' AND name NOT GLOB '*[/ ]*' "
            "ORDER BY id LIMIT 1"
        ).fetchall()
    finally:
        connection.close()
    if not found:
        raise RuntimeError("the generated library has no tag named like python1561")
    return str(found[0][0])


def run() -> list[Row]:
    rows: list[Row] = _Rows()
    compile_marks()
    size = "1M" if COUNT == 1_000_000 else f"{COUNT // 1000}k"
    small = million_gen.cached(100_000, seed=2)
    source = million_gen.cached(COUNT)
    os.sync()  # the generator's writes go out now, not during the measurements
    with tempfile.TemporaryDirectory(prefix="marks-bench-million-") as directory:
        home = Path(directory)
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"),
            "COLUMNS": "100",
        }
        seconds, _, _ = measure([MARKS, "--db", str(home / "100k.db"), "import", "html",
                                 str(small)], env)  # fmt: skip
        rows.append(Row("import html 100k (million's shape)", seconds, "s", 2.5))

        db = home / "library.db"
        seconds, _, peak = measure([MARKS, "--db", str(db), "import", "html", str(source)], env)
        rows.append(Row(f"import html {size}", seconds, "s", 30))
        rows.append(Row(f"import html {size}: peak memory", peak, "MB", 60))

        marks = [MARKS, "--db", str(db)]
        _median_ms(
            [*marks, "bookmark", "list", "--limit", "50"], env, 2
        )  # the file's pages into the page cache
        rows.append(
            Row(
                f"bookmark search --fts kernel at {size}",
                _median_ms([*marks, "bookmark", "search", "--fts", "kernel"], env),
                "ms",
                150,
            )
        )
        # A rare word (a tag's own word: a few hundred bookmarks) and two common words, besides
        # `kernel`, in a fifth of the library: what a ranking bounded for the common word keeps.
        rare = _rare_word(db)
        for words in (rare, "kernel python"):
            rows.append(
                Row(
                    f"bookmark search --fts '{words}' at {size}",
                    _median_ms([*marks, "bookmark", "search", "--fts", *words.split()], env),
                    "ms",
                    150,
                )
            )
        rows.append(
            Row(
                f"bookmark list --limit 50 at {size}",
                _median_ms([*marks, "bookmark", "list", "--limit", "50"], env),
                "ms",
                80,
            )
        )
        for path in ["/", *_top_directories(db, env)]:  # the root first: its counts of each
            rows.append(
                Row(
                    f"shell -c 'ls {path}' at {size}",
                    _median_ms([*marks, "shell", "-c", f"ls {path}"], env, 5),
                    "ms",
                    100,
                )
            )
        rows += _served(db, home, size)

        seconds, _, peak = measure([*marks, "graph", "build"], env)
        rows.append(Row(f"graph build {size}", seconds, "s", 120))
        rows.append(Row(f"graph build {size}: peak memory", peak, "MB", 500))
        seconds, _, _ = measure([*marks, "db", "dedupe", "--yes"], env)
        rows.append(Row(f"db dedupe {size}", seconds, "s", 30))
        exported = home / "exported.html"
        seconds, _, _ = measure([*marks, "export", "html", "--file", str(exported)], env)
        rows.append(Row(f"export html {size}", seconds, "s", 30))
    return rows


def _served(db: Path, home: Path, size: str) -> list[Row]:
    rows = []
    with start_marks(db, home) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        for _ in range(20):  # warm every worker thread's connection and the page cache
            client.get("/bookmarks", params={"limit": 50}).raise_for_status()
            client.get("/search", params={"q": "kernel", "fts": 1}).raise_for_status()
        listing = _latencies(client, "/bookmarks", {"limit": 50}, 200)
        rows.append(Row(f"serve: GET /bookmarks?limit=50 p50 at {size}", _percentile(listing, 0.5),
                        "ms", 5))  # fmt: skip
        searching = _latencies(client, "/search", {"q": "kernel", "fts": 1}, 100)
        rows.append(Row(f"serve: GET /search?fts=1 p50 at {size}", _percentile(searching, 0.5),
                        "ms", 30))  # fmt: skip
        first = _first_render_ms(server.url)
        if first is None:
            raise RuntimeError("playwright is missing: `make dev` installs it")
        rows.append(Row(f"serve: web UI first list rendered at {size}", first, "ms", 500))
    return rows


if __name__ == "__main__":
    from run import print_table

    print_table(run())
