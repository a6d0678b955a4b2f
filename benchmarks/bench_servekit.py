"""servekit: request latency of a JSON endpoint on a real hypercorn server over loopback."""

import statistics
import sys
import time
from pathlib import Path

import httpx

from run import Row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.servers import python_server  # noqa: E402

REQUESTS = 500


def run() -> list[Row]:
    app = ROOT / "tests" / "servekit" / "app_under_test.py"
    with python_server(app) as server, httpx.Client(base_url=server.url) as client:
        for _ in range(50):  # warm up
            client.get("/hello")
        samples = []
        for _ in range(REQUESTS):
            start = time.perf_counter()
            client.get("/hello")
            samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return [
        Row("servekit GET /hello median (keep-alive)", statistics.median(samples), "ms", 5),
        Row("servekit GET /hello p99", samples[int(len(samples) * 0.99)], "ms", 20),
    ]
