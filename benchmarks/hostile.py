"""`make bench-hostile`: issue 10's scenario. A bounded mixed load on loopback against a real server
with the real sandbox: normal jobs from 20 client IPs, plus 5 WebSocket followers that never read,
5 slow uploads, a fork bomb, a memory bomb and a job with a non-UTF-8 output name.

Prints normal jobs completed (and how many were submitted), their latency p50/p99 (submit to
finished, queueing included) against the unloaded p99, their run time in the sandbox (the
interference hostile jobs cause, without the queue), the server's RSS peak, and its open fds
before and after.
`python benchmarks/hostile.py [SECONDS]` (60 by default). Needs root (nsjail).
"""

import asyncio
import io
import os
import shutil
import socket
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from run import Row, print_table  # noqa: E402
from support.servers import ServerProcess  # noqa: E402

BIN = Path(sys.executable).parent
NORMAL = "print(sum(range(100000)))\n"
CLIENTS = 20
FORK_BOMB = (
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)
MEMORY_BOMB = "blocks = []\nwhile True:\n    blocks.append(bytearray(2**20))\n"
BAD_NAME = "open(b'out-\\xff.txt', 'wb').write(b'x')\nopen('ok.txt', 'w').write('ok')\n"
BIG_LOG = "import sys, time\nline = 'h' * 1023 + '\\n'\nfor _ in range(8 * 1024):\n"
BIG_LOG += "    sys.stdout.write(line)\nsys.stdout.flush()\ntime.sleep(20)\n"


def tarball(code: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = code.encode()
        info = tarfile.TarInfo("main.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def run_job(
    client: httpx.AsyncClient, url: str, code: str, ip: str, timeout: int = 30
) -> tuple[float, dict | None]:
    """Submit as `ip` and wait until finished: (seconds, record) or (seconds, None) if refused."""
    started = time.monotonic()
    reply = await client.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", tarball(code))},
        data={"manifest": f'{{"entrypoint": "main.py", "timeout": {timeout}}}'},
        headers={"X-Forwarded-For": ip},
    )
    if reply.status_code != 200:
        return time.monotonic() - started, None
    job_id = reply.json()["job_id"]
    while True:
        record = (await client.get(f"{url}/status/{job_id}")).json()
        if record["status"] in ("completed", "failed"):
            return time.monotonic() - started, record
        await asyncio.sleep(0.05)  # a client's polling interval, not synchronisation


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


async def non_reader(url: str, job_id: str) -> None:
    """A WebSocket follower that completes the handshake and never reads again."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    _, writer = await asyncio.open_connection(host, int(port), limit=4096)
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    writer.write(
        (
            f"GET /logs/{job_id}/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    try:
        await asyncio.Event().wait()  # hold the connection until cancelled
    finally:
        writer.close()


async def slow_upload(url: str, ip: str) -> None:
    """Announce 10 MiB and send a few bytes a second."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"POST /submit HTTP/1.1\r\nHost: {host}\r\nContent-Length: {10 * 2**20}\r\n"
            f"X-Forwarded-For: {ip}\r\nContent-Type: multipart/form-data; boundary=B\r\n\r\n"
        ).encode()
    )
    try:
        while not reader.at_eof():
            writer.write(b"--B\r\n")
            await writer.drain()
            await asyncio.sleep(1)
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def scenario(url: str, pid: int, seconds: float) -> list[Row]:
    async with httpx.AsyncClient(timeout=60) as client:
        calm = [await run_job(client, url, NORMAL, "10.9.0.1") for _ in range(10)]
        unloaded = [took for took, _ in calm]
        unloaded_wall = [record["wall_seconds"] for _, record in calm if record]
        fds_before = fds(pid)
        peak = rss(pid)
        big = await client.post(
            f"{url}/submit",
            files={"files": ("job.tar.gz", tarball(BIG_LOG))},
            data={"manifest": '{"entrypoint": "main.py", "timeout": 60}'},
            headers={"X-Forwarded-For": "10.8.0.1"},
        )
        hostile = [asyncio.create_task(non_reader(url, big.json()["job_id"])) for _ in range(5)]
        hostile += [asyncio.create_task(slow_upload(url, f"10.7.0.{n}")) for n in range(5)]
        bombs = [
            asyncio.create_task(run_job(client, url, code, f"10.6.0.{n}", timeout=20))
            for n, code in enumerate((FORK_BOMB, MEMORY_BOMB, BAD_NAME))
        ]
        latencies: list[float] = []
        walls: list[float] = []  # time in the sandbox: interference, without the queue
        submitted = refused = failed = 0
        deadline = time.monotonic() + seconds

        async def normal_client(ip: str) -> None:
            nonlocal submitted, refused, failed
            while time.monotonic() < deadline:
                submitted += 1
                took, record = await run_job(client, url, NORMAL, ip)
                if record is None:
                    refused += 1
                    await asyncio.sleep(1)  # as a client told 429 would
                elif record["status"] == "completed":
                    latencies.append(took)
                    walls.append(record["wall_seconds"])
                else:
                    failed += 1

        async def sample() -> None:
            nonlocal peak
            while time.monotonic() < deadline + 5:
                peak = max(peak, rss(pid))
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(normal_client(f"10.5.0.{n}") for n in range(CLIENTS)))
        bomb_records = await asyncio.gather(*bombs)
        for task in hostile:
            task.cancel()
        await asyncio.gather(*hostile, return_exceptions=True)
        await sampler
    fds_after = fds(pid)
    for _ in range(100):  # connections close as the server notices
        if fds_after <= fds_before:
            break
        await asyncio.sleep(0.1)
        fds_after = fds(pid)
    bomb_text = ", ".join(
        f"{name}: {record['failure'] or record['status'] if record else 'refused'}"
        for name, (_, record) in zip(("fork", "memory", "bad-name"), bomb_records, strict=True)
    )
    print(f"hostile jobs: {bomb_text}", file=sys.stderr)
    print(
        f"normal jobs: {len(latencies)} completed of {submitted} submitted "
        f"({refused} refused 429, {failed} failed)",
        file=sys.stderr,
    )
    unloaded_p99 = percentile(unloaded, 0.99)
    return [
        Row("hostile: normal jobs completed", len(latencies), "jobs"),
        Row("hostile: normal jobs failed", failed, "jobs", 0),
        Row("hostile: unloaded p99", unloaded_p99 * 1000, "ms"),
        Row("hostile: loaded p50", percentile(latencies, 0.5) * 1000, "ms"),
        Row(
            "hostile: loaded p99", percentile(latencies, 0.99) * 1000, "ms", 2 * unloaded_p99 * 1000
        ),
        Row("hostile: unloaded run p99", percentile(unloaded_wall, 0.99) * 1000, "ms"),
        Row(
            "hostile: loaded run p99",
            percentile(walls, 0.99) * 1000,
            "ms",
            2 * percentile(unloaded_wall, 0.99) * 1000,
        ),
        Row("hostile: server RSS peak", peak / 2**20, "MB", 300),
        Row("hostile: fds before", fds_before, "fds"),
        Row("hostile: fds after", fds_after, "fds", fds_before),
        Row("hostile: mean normal job", statistics.fmean(latencies or [0]) * 1000, "ms"),
    ]


def run(seconds: float = 60.0) -> list[Row]:
    state = Path(tempfile.mkdtemp(prefix="jobrunner-hostile-", dir="/tmp"))
    state.chmod(0o711)
    server = ServerProcess(
        [
            str(BIN / "jobrunner"),
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(state),
            "--trusted-proxy",
            "127.0.0.1",  # each simulated client is its own IP through X-Forwarded-For
            "--concurrency",
            "4",
            # Per-IP hourly and CPU quotas would refuse a busy client long before 60 s end; this
            # scenario is about hostile load, so only the concurrent limit (2) stays.
            "--rate-per-hour",
            "100000",
            "--rate-cpu-seconds",
            "100000",
        ],
        env={"JOBRUNNER_UPLOAD_TIMEOUT": "20", "JOBRUNNER_FOLLOWER_STALL": "5"},
    )
    try:
        return asyncio.run(scenario(server.url, server.proc.pid, seconds))
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    print_table(run(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0))
