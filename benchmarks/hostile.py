"""`make bench-hostile`: issue 10's scenario. A bounded mixed load on loopback against a real server
with the real sandbox: does hostile traffic slow down the normal users of a server?

Normal users are 20 client IPs, each submitting a small job, waiting for its result, then pausing
for a random think time (2 s on average, the same seeded sequence in every phase): about 40 % of
what this server completes per second when flooded, so a queue only forms when something takes
capacity away. The scenario runs three phases on one server:

1. idle: 30 jobs one after the other from one client (the latency floor, for reference);
2. unloaded: the 20 normal users alone for SECONDS;
3. loaded: the same 20 users for SECONDS while, for the whole window, a fork bomb that first
   writes an 8 MiB log holds its slot (the window is its time limit), 5 WebSocket followers of
   that live log never read (each is replaced by a new one when the server drops it), 5 uploads
   trickle a few bytes a second (each is reopened when the server times it out), and a memory bomb
   and a job writing a non-UTF-8 output name run (with the window as their limit too).

The hostile jobs are the issue's list and nothing else. An earlier version gave the followers a
job of their own that slept for the window: a fourth long job, not hostile (any server owes a
sleeping job its slot), that left the normal users one slot of four until the memory bomb ended.

The target compares phase 3 with phase 2: hostile traffic may at most double the normal users' p99
latency (submit to finished, queueing included). The loaded p99 against the idle p99 (the
stricter reading of "unloaded") is printed beside it. Also printed: every normal job completed,
their time in the sandbox (interference without the queue), the server's RSS peak and its open
fds before and after the loaded phase.

Why users who pause and not a flood: with every client submitting again the moment its job ends,
4 slots serve a queue of 20 and the latency is the queue's length, whatever the hostile jobs do;
that measures throughput (`make bench` does), not interference.

`python benchmarks/hostile.py [SECONDS]` (60 by default). Needs root (nsjail). To see what each
attack costs, `HOSTILE=fork,memory,bad-name,followers,uploads` (the default: all) picks parts
(the followers follow the fork bomb's log, so `followers` brings the fork bomb);
`HOSTILE_TRACE=FILE` writes a line per normal job (its start in the phase, latency, time in the
sandbox) and one per hostile job.
"""

import asyncio
import contextlib
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from run import Row, print_table  # noqa: E402
from support.jobclient import tarball  # noqa: E402
from support.servers import ServerProcess  # noqa: E402

BIN = Path(sys.executable).parent
CLIENTS = 20
PARTS = ("fork", "memory", "bad-name", "followers", "uploads")
THINK_SECONDS = 2.0  # a normal user's mean pause between a result and the next submission
STALL_SECONDS = 5  # the server's follower stall limit in this scenario
NORMAL = "print(sum(range(100000)))\n"
FORK_BOMB = (  # an 8 MiB log for the followers first
    "import os, sys\nline = 'h' * 1023 + '\\n'\nfor _ in range(8 * 1024):\n"
    "    sys.stdout.write(line)\nsys.stdout.flush()\n"
    "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)
MEMORY_BOMB = "blocks = []\nwhile True:\n    blocks.append(bytearray(2**20))\n"
BAD_NAME = "open(b'out-\\xff.txt', 'wb').write(b'x')\nopen('ok.txt', 'w').write('ok')\n"


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


async def submit(
    client: httpx.AsyncClient, url: str, code: str, ip: str, timeout: int = 30
) -> str | None:
    reply = await client.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", tarball({"main.py": code}))},
        data={"manifest": f'{{"entrypoint": "main.py", "timeout": {timeout}}}'},
        headers={"X-Forwarded-For": ip},
    )
    return reply.json()["job_id"] if reply.status_code == 200 else None


async def run_job(
    client: httpx.AsyncClient, url: str, code: str, ip: str, timeout: int = 30
) -> tuple[float, dict | None]:
    """Submit as `ip` and wait until finished: (seconds, record) or (seconds, None) if refused."""
    started = time.monotonic()
    job_id = await submit(client, url, code, ip, timeout)
    if job_id is None:
        return time.monotonic() - started, None
    return await finished(client, url, job_id, started)


async def finished(
    client: httpx.AsyncClient, url: str, job_id: str, started: float
) -> tuple[float, dict]:
    """Poll until the job has finished: (seconds since `started`, its record)."""
    while True:
        record = (await client.get(f"{url}/status/{job_id}")).json()
        if record["status"] in ("completed", "failed"):
            return time.monotonic() - started, record
        await asyncio.sleep(0.05)  # a client's polling interval, not synchronisation


@dataclass
class Phase:
    """What the normal users saw in one phase."""

    latencies: list[float] = field(default_factory=list)  # submit to finished
    walls: list[float] = field(default_factory=list)  # time in the sandbox
    submitted: int = 0
    refused: int = 0
    failed: int = 0
    trace: list[str] = field(default_factory=list)  # one line per job, for HOSTILE_TRACE


async def normal_users(client: httpx.AsyncClient, url: str, seconds: float) -> Phase:
    phase = Phase()
    start = time.monotonic()
    deadline = start + seconds

    async def user(n: int) -> None:
        think = random.Random(n)  # the same pauses in every phase
        await asyncio.sleep(think.uniform(0, THINK_SECONDS))  # users do not start in step
        while time.monotonic() < deadline:
            phase.submitted += 1
            at = time.monotonic() - start
            took, record = await run_job(client, url, NORMAL, f"10.5.0.{n}")
            wall = record["wall_seconds"] if record else None
            phase.trace.append(f"{at:.3f} user={n} took={took:.3f} wall={wall}")
            if record is None:
                phase.refused += 1
            elif record["status"] == "completed":
                phase.latencies.append(took)
                phase.walls.append(record["wall_seconds"])
            else:
                phase.failed += 1
            await asyncio.sleep(think.expovariate(1 / THINK_SECONDS))

    await asyncio.gather(*(user(n) for n in range(CLIENTS)))
    return phase


async def non_reader(url: str, job_id: str, until: float) -> None:
    """WebSocket followers that complete the handshake and never read: each is held until the
    server must have dropped it, then replaced by a new one, until `until`."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    while time.monotonic() < until:
        _, writer = await asyncio.open_connection(host, int(port), limit=4096)
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        writer.write(
            (
                f"GET /logs/{job_id}/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        try:
            await writer.drain()
            await asyncio.sleep(STALL_SECONDS + 2)  # never reading: the server must drop us
        finally:
            writer.close()


async def slow_upload(url: str, ip: str, until: float) -> None:
    """Announce 10 MiB and send a few bytes a second; start over when the server gives up."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    while time.monotonic() < until:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            (
                f"POST /submit HTTP/1.1\r\nHost: {host}\r\nContent-Length: {10 * 2**20}\r\n"
                f"X-Forwarded-For: {ip}\r\nContent-Type: multipart/form-data; boundary=B\r\n\r\n"
            ).encode()
        )
        try:
            while not reader.at_eof() and time.monotonic() < until:
                writer.write(b"--B\r\n")
                await writer.drain()
                await asyncio.sleep(1)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


async def scenario(url: str, pid: int, seconds: float) -> list[Row]:
    window = int(seconds)
    async with httpx.AsyncClient(timeout=60) as client:
        idle = [await run_job(client, url, NORMAL, "10.9.0.1") for _ in range(30)]
        print("idle done; unloaded phase ...", file=sys.stderr, flush=True)
        unloaded = await normal_users(client, url, seconds)
        print("unloaded done; loaded phase ...", file=sys.stderr, flush=True)
        fds_before = fds(pid)
        peak = rss(pid)
        until = time.monotonic() + seconds
        parts = set(os.environ.get("HOSTILE", ",".join(PARTS)).split(","))
        hostile = []
        bombs: dict[str, asyncio.Task[tuple[float, dict | None]]] = {}
        if parts & {"fork", "followers"}:
            fork = await submit(client, url, FORK_BOMB, "10.6.0.0", timeout=window)
            assert fork is not None, "the fork bomb was refused"
            bombs["fork"] = asyncio.create_task(finished(client, url, fork, time.monotonic()))
            if "followers" in parts:
                hostile += [asyncio.create_task(non_reader(url, fork, until)) for _ in range(5)]
        if "uploads" in parts:
            hostile += [
                asyncio.create_task(slow_upload(url, f"10.7.0.{n}", until)) for n in range(5)
            ]
        for n, (name, code) in enumerate((("memory", MEMORY_BOMB), ("bad-name", BAD_NAME)), 1):
            if name in parts:
                bombs[name] = asyncio.create_task(
                    run_job(client, url, code, f"10.6.0.{n}", timeout=window)
                )

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss(pid))
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample())
        loaded = await normal_users(client, url, seconds)
        bomb_records = await asyncio.gather(*bombs.values())
        await asyncio.gather(*hostile, return_exceptions=True)
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    fds_after = fds(pid)
    for _ in range(100):  # connections close as the server notices
        if fds_after <= fds_before:
            break
        await asyncio.sleep(0.1)
        fds_after = fds(pid)
    bomb_text = ", ".join(
        f"{name}: {record['failure'] or record['status'] if record else 'refused'}"
        for name, (_, record) in zip(bombs, bomb_records, strict=True)
    )
    print(f"hostile jobs: {bomb_text}", file=sys.stderr)
    if trace := os.environ.get("HOSTILE_TRACE"):
        lines = [
            f"{name} {line}"
            for name, p in (("unloaded", unloaded), ("loaded", loaded))
            for line in p.trace
        ]
        lines += [
            f"bomb {name} took={took:.3f} record={record}"
            for name, (took, record) in zip(bombs, bomb_records, strict=True)
        ]
        Path(trace).write_text("\n".join(lines) + "\n")
    for name, phase in (("unloaded", unloaded), ("loaded", loaded)):
        print(
            f"{name}: {len(phase.latencies)} normal jobs completed of {phase.submitted} submitted "
            f"({phase.refused} refused, {phase.failed} failed)",
            file=sys.stderr,
        )
    idle_p99 = percentile([took for took, _ in idle], 0.99)
    unloaded_p99 = percentile(unloaded.latencies, 0.99)
    unloaded_run_p99 = percentile(unloaded.walls, 0.99)
    loaded_p99 = percentile(loaded.latencies, 0.99)
    return [
        Row("hostile: idle p99 (one client)", idle_p99 * 1000, "ms"),
        Row("hostile: unloaded jobs completed", len(unloaded.latencies), "jobs"),
        Row("hostile: unloaded p50", percentile(unloaded.latencies, 0.5) * 1000, "ms"),
        Row("hostile: unloaded p99", unloaded_p99 * 1000, "ms"),
        Row("hostile: loaded jobs completed", len(loaded.latencies), "jobs"),
        Row("hostile: loaded jobs not completed", loaded.refused + loaded.failed, "jobs", 0),
        Row("hostile: loaded p50", percentile(loaded.latencies, 0.5) * 1000, "ms"),
        Row("hostile: loaded p99", loaded_p99 * 1000, "ms", 2 * unloaded_p99 * 1000),
        Row("hostile: loaded p99 / idle p99", loaded_p99 / idle_p99, "x"),
        Row("hostile: unloaded run p99", unloaded_run_p99 * 1000, "ms"),
        Row(
            "hostile: loaded run p99",
            percentile(loaded.walls, 0.99) * 1000,
            "ms",
            2 * unloaded_run_p99 * 1000,
        ),
        Row("hostile: server RSS peak", peak / 2**20, "MB", 300),
        Row("hostile: fds before", fds_before, "fds"),
        Row("hostile: fds after", fds_after, "fds", fds_before),
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
            # Per-IP hourly and CPU quotas would refuse a busy client long before the end; this
            # scenario is about hostile load, so only the concurrent limit (2) stays.
            "--rate-per-hour",
            "100000",
            "--rate-cpu-seconds",
            "100000",
        ],
        env={
            "JOBRUNNER_UPLOAD_TIMEOUT": "20",
            "JOBRUNNER_FOLLOWER_STALL": str(STALL_SECONDS),
        },
    )
    try:
        return asyncio.run(scenario(server.url, server.proc.pid, seconds))
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    print_table(run(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0))
