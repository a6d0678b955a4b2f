"""servekit: request latency of a JSON endpoint on a real hypercorn server over loopback, and how
long a burst of clients connecting at once waits to be answered."""

import asyncio
import os
import signal
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
BURST = 300  # clients connecting at once, each on a new connection
ROUNDS = 5
BUSY = 0.05


async def burst(url: str, pid: int) -> float:
    """Seconds until BURST clients, connecting at the same moment to a server busy for BUSY
    seconds (stopped: it accepts nothing meanwhile), all have their answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)

    async def one() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"GET /hello HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await reader.read()
        writer.close()

    start = time.perf_counter()
    os.kill(pid, signal.SIGSTOP)
    asyncio.get_running_loop().call_later(BUSY, os.kill, pid, signal.SIGCONT)
    await asyncio.gather(*(one() for _ in range(BURST)))
    return time.perf_counter() - start


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
        # A client whose SYN finds the accept queue full waits for its retransmission (1 s).
        bursts = [asyncio.run(burst(server.url, server.proc.pid)) * 1000 for _ in range(ROUNDS)]
    samples.sort()
    return [
        Row("servekit GET /hello median (keep-alive)", statistics.median(samples), "ms", 5),
        Row("servekit GET /hello p99", samples[int(len(samples) * 0.99)], "ms", 20),
        Row(
            f"servekit {BURST} clients at once, busy {BUSY * 1000:.0f} ms: all answered",
            statistics.median(bursts),
            "ms",
            1000,
        ),
    ]
