"""jobrunner: sandbox overhead, latency, throughput, event-loop responsiveness and memory.

Every server here is started by the benchmark on 127.0.0.1; request counts are bounded.
"""

import asyncio
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx
import websockets

from run import Row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.servers import ServerProcess  # noqa: E402

BIN = Path(sys.executable).parent
HELLO = b"print('hello')\n"


def tarball(code: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("main.py")
        info.size = len(code)
        archive.addfile(info, io.BytesIO(code))
    return buffer.getvalue()


class Server:
    def __init__(self, *args: str) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="jobrunner-bench-", dir="/tmp"))
        self.state.chmod(0o711)
        self.process = ServerProcess(
            [str(BIN / "jobrunner"), "serve", "--port", "0", "--state-dir", str(self.state), *args]
        )
        self.url = self.process.url

    def close(self) -> None:
        self.process.stop()
        shutil.rmtree(self.state, ignore_errors=True)


def sandbox_overhead() -> list[Row]:
    """Median of `python -c pass` in our jail (policy + per-job flags) minus bare."""
    from jobrunner.sandbox import Sandbox
    from jobrunner.sandbox.jail import POLICY

    root = Path(tempfile.mkdtemp(dir="/tmp"))
    root.chmod(0o711)
    sandbox = Sandbox.find(root)
    env = root / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(env)], check=True)
    work = root / "work"
    work.mkdir()
    uid = sandbox.job_ids.take()  # the host uid of the job slot, as jail.py maps it
    os.chown(work, uid, uid)
    job = sandbox.cgroups.create("bench-overhead", 512 * 2**20)
    jailed = [
        str(sandbox.nsjail),
        "--config",
        str(POLICY),
        "--log",
        str(root / "log"),
        "--user",
        f"65534:{uid}:1",
        "--group",
        f"65534:{uid}:1",
        "--bindmount",
        f"{work}:/work",
        "--bindmount_ro",
        f"{env}:/venv",
        *sandbox.cgroups.flags(job, 512 * 2**20),
        "--",
        "/venv/bin/python",
        "-c",
        "pass",
    ]
    bare = [str(env / "bin" / "python"), "-c", "pass"]

    def median_ms(argv: list[str]) -> float:
        samples = []
        for _ in range(30):
            start = time.perf_counter()
            subprocess.run(argv, check=True)
            samples.append((time.perf_counter() - start) * 1000)
        return statistics.median(samples)

    try:
        bare_ms, jailed_ms = median_ms(bare), median_ms(jailed)
    finally:
        job.remove()
        sandbox.cgroups.reap()
        shutil.rmtree(sandbox.layout.root, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    return [
        Row(
            "sandbox overhead: jailed minus bare `python -c pass` (median)",
            jailed_ms - bare_ms,
            "ms",
            20,
        )
    ]


async def _submit_and_follow(
    client: httpx.AsyncClient, url: str, code: bytes, headers: dict | None = None
) -> float:
    start = time.perf_counter()
    response = await client.post(
        "/submit",
        data={"manifest": '{"entrypoint": "main.py"}'},
        files={"files": ("job.tar.gz", tarball(code))},
        headers=headers,
    )
    job = response.json()["job_id"]
    ws = url.replace("http", "ws", 1) + f"/logs/{job}/stream"
    # The client follows its own job as itself: per-IP limits count log streams too.
    async with websockets.connect(ws, additional_headers=headers) as socket:
        try:
            async for _ in socket:
                pass
        except websockets.ConnectionClosed:
            pass
        assert socket.close_reason == "completed", socket.close_reason
    return (time.perf_counter() - start) * 1000


def submit_latency() -> list[Row]:
    server = Server("--rate-per-hour", "100000", "--rate-cpu-seconds", "100000")
    try:

        async def measure() -> list[float]:
            async with httpx.AsyncClient(base_url=server.url) as client:
                for _ in range(3):
                    await _submit_and_follow(client, server.url, HELLO)
                return [await _submit_and_follow(client, server.url, HELLO) for _ in range(30)]

        samples = asyncio.run(measure())
    finally:
        server.close()
    return [
        Row(
            "submit-to-completed, hello world, idle server (median)",
            statistics.median(samples),
            "ms",
            150,
        )
    ]


def throughput() -> list[Row]:
    """Trivial jobs from 40 client addresses (through a trusted proxy), default per-IP limits."""
    server = Server("--trusted-proxy", "127.0.0.1")
    jobs = 120
    try:

        async def measure() -> float:
            limits = httpx.Limits(max_connections=80)
            async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as client:

                async def client_ip(number: int) -> None:
                    headers = {"X-Forwarded-For": f"198.51.100.{number}"}
                    for _ in range(jobs // 40):
                        await _submit_and_follow(client, server.url, HELLO, headers)

                start = time.perf_counter()
                await asyncio.gather(*(client_ip(n) for n in range(40)))
                return time.perf_counter() - start

        elapsed = asyncio.run(measure())
    finally:
        server.close()
    return [
        Row(
            f"throughput, {jobs} trivial jobs from 40 addresses",
            jobs / elapsed,
            "jobs/s",
            15,
            higher_is_better=True,
        )
    ]


def status_latency_under_load() -> list[Row]:
    server = Server("--rate-cpu-seconds", "100000")
    burn = b"import time\nend = time.time() + 8\nwhile time.time() < end:\n    pass\n"
    try:
        with httpx.Client(base_url=server.url) as client:
            ids = [
                client.post(
                    "/submit",
                    data={"manifest": '{"entrypoint": "main.py"}'},
                    files={"files": ("job.tar.gz", tarball(burn))},
                ).json()["job_id"]
                for _ in range(2)
            ]
            time.sleep(0.5)
            assert all(client.get(f"/status/{i}").json()["status"] == "running" for i in ids)
            samples = []
            for number in range(600):
                start = time.perf_counter()
                client.get(f"/status/{ids[number % 2]}")
                samples.append((time.perf_counter() - start) * 1000)
                time.sleep(0.005)
    finally:
        server.close()
    samples.sort()
    return [
        Row(
            "GET /status p99 while two CPU-bound jobs run",
            samples[int(len(samples) * 0.99)],
            "ms",
            50,
        )
    ]


def memory_with_queue() -> list[Row]:
    server = Server("--concurrency", "1", "--trusted-proxy", "127.0.0.1")
    blocker = b"import time\ntime.sleep(20)\n"
    try:
        with httpx.Client(base_url=server.url) as client:

            def submit(code: bytes, number: int) -> None:
                response = client.post(
                    "/submit",
                    data={"manifest": '{"entrypoint": "main.py"}'},
                    files={"files": ("job.tar.gz", tarball(code))},
                    headers={"X-Forwarded-For": f"203.0.{number // 200}.{number % 200}"},
                )
                assert response.status_code == 200, response.text

            submit(blocker, 999)
            for number in range(200):
                submit(HELLO, number)
            assert client.get("/stats").json()["system"]["queue_length"] == 200
            status = Path(f"/proc/{server.process.proc.pid}/status").read_text()
            rss_kb = int(
                next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
            )
    finally:
        server.close()
    return [Row("server resident memory with 200 jobs queued", rss_kb / 1024, "MB", 150)]


def run() -> list[Row]:
    if os.geteuid() != 0:
        print("jobrunner benchmarks need root (the sandbox); skipped", file=sys.stderr)
        return []
    rows = []
    for measure in (
        sandbox_overhead,
        submit_latency,
        throughput,
        status_latency_under_load,
        memory_with_queue,
    ):
        rows += measure()
    return rows
