"""marks serve at 100,000 bookmarks over loopback: list and search latency, list throughput with
20 connections, a whole JSON export (time and the server's memory), and the web UI's first list
in Debian's chromium."""

import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from netscape_gen import generate
from run import Row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.marksserve import start_marks  # noqa: E402

MARKS = str(Path(sys.executable).with_name("marks"))
COUNT = 100_000
SAMPLES = 400
CONNECTIONS = 20
THROUGHPUT_REQUESTS = 3000


def _status(pid: int, field: str) -> float:
    """VmRSS or VmHWM of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def _reset_peak(pid: int) -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _latencies(client: httpx.Client, path: str, params: dict, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        response = client.get(path, params=params)
        samples.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
    return sorted(samples)


def _percentile(samples: list[float], fraction: float) -> float:
    return samples[min(len(samples) - 1, int(len(samples) * fraction))]


def _wrk_throughput(url: str) -> float | None:
    """Requests per second measured by wrk (C, two threads): a Python client on the same two
    cores spends more CPU per request than the server and would measure itself instead."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    done = subprocess.run(
        [wrk, "-t2", f"-c{CONNECTIONS}", "-d8s", f"{url}/bookmarks?limit=50"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = re.search(r"Requests/sec:\s+([0-9.]+)", done.stdout)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", done.stdout)
    if found is None or errors is not None:
        raise RuntimeError(f"wrk: {done.stdout}")
    return float(found.group(1))


async def _throughput(url: str) -> float:
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        remaining = THROUGHPUT_REQUESTS

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                (await client.get("/bookmarks", params={"limit": 50})).raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        return THROUGHPUT_REQUESTS / (time.perf_counter() - start)


def _first_render_ms(url: str) -> float | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        context = browser.new_context()
        timings = []
        for _ in range(3):  # the first visit also compiles; report the median of three
            # Each visit in a new tab, as a person opens the UI: a visit in the same tab also
            # timed tearing down the last visit's page (at a million, a sidebar of 21,000 tags).
            page = context.new_page()
            page.goto(url + "/", wait_until="commit")
            page.wait_for_selector("body[data-loaded=true] #list > li")
            timings.append(page.evaluate("performance.now()"))
            # The page's other requests (the sidebar's counts) end before the next visit: else
            # the server still answers the last visit's while the next one is timed.
            page.wait_for_load_state("networkidle", timeout=120_000)
            page.close()
        browser.close()
    return statistics.median(timings)


def run() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        source = home / "bookmarks.html"
        source.write_text(generate(COUNT, seed=12))
        db = home / "library.db"
        env = {**os.environ, "XDG_CONFIG_HOME": str(home / "config")}
        subprocess.run(
            [MARKS, "--db", str(db), "import", "html", str(source)],
            check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with start_marks(db, home) as server, httpx.Client(base_url=server.url) as client:
            pid = server.proc.pid
            for _ in range(30):  # warm up every worker thread's connection and caches
                client.get("/bookmarks", params={"limit": 50})
                client.get("/search", params={"q": "kernel", "fts": 1})

            _reset_peak(pid)
            before = _status(pid, "VmRSS")
            start = time.perf_counter()
            size = 0
            with client.stream("GET", "/export/json", timeout=120) as response:
                for chunk in response.iter_bytes():
                    size += len(chunk)
            export_seconds = time.perf_counter() - start
            rise = _status(pid, "VmHWM") - before
            rows.append(Row("serve: GET /export/json of 100k", export_seconds, "s", 3))
            rows.append(Row("serve: RSS rise during that export", rise, "MB", 50))

            listing = _latencies(client, "/bookmarks", {"limit": 50}, SAMPLES)
            rows.append(
                Row("serve: GET /bookmarks?limit=50 p50", _percentile(listing, 0.5), "ms", 10)
            )
            rows.append(
                Row("serve: GET /bookmarks?limit=50 p99", _percentile(listing, 0.99), "ms", 40)
            )
            searching = _latencies(client, "/search", {"q": "kernel", "fts": 1}, SAMPLES // 2)
            rows.append(Row("serve: GET /search?fts=1 p50", _percentile(searching, 0.5), "ms", 30))
            rate = _wrk_throughput(server.url) or asyncio.run(_throughput(server.url))
            rows.append(
                Row(
                    "serve: list req/s with 20 connections",
                    rate,
                    "req/s",
                    500,
                    higher_is_better=True,
                )
            )
            first = _first_render_ms(server.url)
            if first is not None:
                rows.append(Row("serve: web UI first list rendered", first, "ms", 1000))
    return rows
