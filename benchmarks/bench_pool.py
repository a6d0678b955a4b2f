"""jobrunner pool: throughput of two workers through the coordinator against one worker, and the
latency the coordinator adds. Each worker runs one job at a time, so "one worker" and "two
workers" compare like with like.

On one 2-core machine the two workers, the coordinator and this load generator share the same
cores: a trivial job costs about 38 ms of CPU in all (10 ms in the worker's server, 21 ms in the
sandboxed job, 7 ms here), so the machine tops out near 50 jobs/s whatever the coordinator does,
while one worker alone already reaches about 28. The ratio is reported with the CPU budget that
bounds it (`ceiling`), measured in the same run."""

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

from bench_jobrunner import HELLO, Server, _submit_and_follow
from run import Row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.jobclient import GENEROUS, worker_key, write_allowlist  # noqa: E402
from support.servers import ServerProcess  # noqa: E402

BIN = Path(sys.executable).parent
WORKER = ["--concurrency", "1", "--trusted-proxy", "127.0.0.1", *GENEROUS]
JOBS = 80


def throughput(url: str) -> float:
    async def measure() -> float:
        async with httpx.AsyncClient(
            base_url=url, timeout=60, limits=httpx.Limits(max_connections=40)
        ) as client:

            async def one_client(number: int) -> None:
                headers = {"X-Forwarded-For": f"198.51.100.{number}"}
                for _ in range(JOBS // 20):
                    await _submit_and_follow(client, url, HELLO, headers)

            start = time.perf_counter()
            await asyncio.gather(*(one_client(n) for n in range(20)))
            return JOBS / (time.perf_counter() - start)

    return asyncio.run(measure())


def latency(url: str) -> float:
    async def measure() -> list[float]:
        async with httpx.AsyncClient(base_url=url) as client:
            for _ in range(3):
                await _submit_and_follow(client, url, HELLO)
            return [await _submit_and_follow(client, url, HELLO) for _ in range(25)]

    return statistics.median(asyncio.run(measure()))


def _cpu_seconds() -> float:
    """CPU used by the whole machine so far (all processes, from /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    busy = sum(int(value) for index, value in enumerate(fields[:8]) if index not in (3, 4))
    return busy / os.sysconf("SC_CLK_TCK")


def start_pool(workers: list[Server], state: Path) -> ServerProcess:
    config = write_allowlist(state / "workers.toml", [(w.url, worker_key(w.url)) for w in workers])
    return ServerProcess(
        [
            str(BIN / "jobrunner"),
            "pool",
            "--workers",
            str(config),
            "--port",
            "0",
            "--state-dir",
            str(state / "pool"),
            "--health-interval",
            "1",
            "--trusted-proxy",
            "127.0.0.1",
            "--rate-concurrent",
            "1000",
            "--rate-per-hour",
            "100000",
            "--rate-cpu-seconds",
            "100000",
        ]
    )


def run() -> list[Row]:
    if os.geteuid() != 0:
        return []
    workers = [Server(*WORKER), Server(*WORKER)]
    pool = start_pool(workers, workers[0].state)
    try:
        time.sleep(1.5)
        before = _cpu_seconds()
        one = throughput(workers[0].url)
        per_job = (_cpu_seconds() - before) / JOBS  # every process's CPU for one job
        ceiling = (os.cpu_count() or 1) / per_job / one
        two = throughput(pool.url)
        direct = latency(workers[1].url)
        through = latency(pool.url)
    finally:
        pool.stop()
        for worker in workers:
            worker.close()
    return [
        Row("one worker (1 slot): trivial jobs", one, "jobs/s"),
        Row("this machine's ceiling for the pool / one worker (CPU budget)", ceiling, "x"),
        Row("pool of 2 workers (1 slot each): trivial jobs", two, "jobs/s"),
        Row("pool throughput / one worker's", two / one, "x", 1.7, higher_is_better=True),
        Row("submit-to-completed added by the coordinator (median)", through - direct, "ms", 10),
    ]
