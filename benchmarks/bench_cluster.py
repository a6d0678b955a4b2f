"""jobrunner serve --cluster (issue 24): nodes on one redis-server, measured against one node and
against the embedded mode on this machine. Other work shares this 2-core machine while it runs
(say so next to any number quoted).

(a) jobs that each sleep 1 s: 3 nodes of 4 slots against 1 node of 4 slots (jobs/s);
(b) the queue alone: 100 nodes played by this benchmark over the cluster protocol (the Lua
    scripts: enqueue, then finish with a record and claim the next; jobs shorter than the
    nodes' --start-after (0.25 s) write no start), no sandbox, no HTTP (jobs/s, and the
    CPU per job of the benchmark's processes and of redis); and what a front end adds to a
    submit (p50) over the embedded mode;
(c) 10,000 finished jobs held: the store's used_memory, and a front end's RSS before and after
    reading 2,000 of them;
(d) hello world, submit to completed, in cluster mode against the embedded mode: rounds of one
    job on each, one after the other; the median of the rounds' ratios.
"""

import asyncio
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec

from bench_jobrunner import Server, tarball
from run import Row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from jobrunner.cluster.queue import ClusterQueue  # noqa: E402
from jobrunner.cluster.store import Store, connect  # noqa: E402
from jobrunner.errors import ClusterUnavailable  # noqa: E402
from support.jobclient import GENEROUS, worker_key  # noqa: E402
from support.redisserver import RedisServer  # noqa: E402

BIN = Path(sys.executable).parent
SLEEPER = b"import time\ntime.sleep(1)\n"
HELLO = b"print('hello')\n"
T = TypeVar("T")


def allow(redis: RedisServer, url: str) -> None:
    subprocess.run(
        [str(BIN / "jobrunner"), "cluster", "allow", worker_key(url), "--cluster", redis.url],
        check=True,
        capture_output=True,
    )


def node(redis: RedisServer, concurrency: int, *args: str) -> Server:
    server = Server(
        *GENEROUS,
        "--cluster",
        redis.url,
        "--concurrency",
        str(concurrency),
        "--trusted-proxy",
        "127.0.0.1",
        *args,
    )
    allow(redis, server.url)
    return server


async def _run_one(client: httpx.AsyncClient, url: str, code: bytes) -> float:
    started = time.perf_counter()
    while True:  # as a client does: a 503 is tried again after its Retry-After
        answer = await client.post(
            f"{url}/submit",
            files={"files": ("job.tar.gz", tarball(code))},
            data={"manifest": '{"entrypoint": "main.py"}'},
        )
        if answer.status_code != 503:
            break
        await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))
    assert answer.status_code == 200, answer.text
    job = answer.json()["job_id"]
    while True:
        try:
            reply = await client.get(f"{url}/status/{job}", params={"wait": "10"})
        except httpx.TransportError:  # a kept-alive connection the server had just closed
            continue
        record = reply.json()
        if "status" not in record:  # an error answer: say it, ask again
            print(f"status of {job}: {reply.status_code} {record}", file=sys.stderr)
            await asyncio.sleep(0.5)
            continue
        if record["status"] in ("completed", "failed"):
            assert record["status"] == "completed", record
            return time.perf_counter() - started


def sleepers_per_second(urls: list[str], jobs: int) -> float:
    async def measure() -> float:
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=100)) as c:
            started = time.perf_counter()
            await asyncio.gather(*(_run_one(c, urls[n % len(urls)], SLEEPER) for n in range(jobs)))
            return jobs / (time.perf_counter() - started)

    return asyncio.run(measure())


def hello_paired(embedded: str, cluster: str, rounds: int = 40) -> tuple[float, float, float]:
    """Hello world, submit to completed, in rounds that each time one job on the embedded
    server then one on the cluster, one after the other: the medians (ms) of each, and the
    median of the rounds' ratios (a busy moment of the machine falls on both of a round)."""

    async def measure() -> tuple[float, float, float]:
        async with httpx.AsyncClient(timeout=60) as client:
            for _ in range(3):
                await _run_one(client, embedded, HELLO)
                await _run_one(client, cluster, HELLO)
            pairs = []
            for _ in range(rounds):
                alone = await _run_one(client, embedded, HELLO)
                pairs.append((alone, await _run_one(client, cluster, HELLO)))
        return (
            statistics.median(a for a, _ in pairs) * 1000,
            statistics.median(c for _, c in pairs) * 1000,
            statistics.median(c / a for a, c in pairs),
        )

    return asyncio.run(measure())


def _submit_ms(client: httpx.Client, url: str, body: bytes) -> float:
    started = time.perf_counter()
    answer = client.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", body)},
        data={"manifest": '{"entrypoint": "main.py", "timeout": 30}'},
    )
    answer.raise_for_status()
    return (time.perf_counter() - started) * 1000


def submit_p50s(embedded: str, front: str, rounds: int = 60) -> tuple[float, float]:
    """The time a submit takes to be answered (the job is only queued), embedded and on a front
    end, alternately: the p50 of each (ms)."""
    body = tarball(b"import time\ntime.sleep(30)\n")
    times: tuple[list[float], list[float]] = ([], [])
    with httpx.Client(timeout=30) as client:
        for n in range(rounds + 3):
            for url, kept in ((embedded, times[0]), (front, times[1])):
                took = _submit_ms(client, url, body)
                if n >= 3:
                    kept.append(took)
    return statistics.median(times[0]), statistics.median(times[1])


RECORD = b"x" * 700  # a status record's size, about
# The simulated nodes are spread over processes, as nodes are, and so are the front ends that
# feed them: PROCESSES of nodes and FEED_PROCESSES of front ends, all on the one redis. Two of
# each on this 2-core machine: with one front-end process against four of nodes, the front end
# had a fifth of the CPU, the queue was nearly always empty and every job paid an idle node's
# wake-up and claim on top (4.9 calls to the store per job against 4.2; see the README).
PROCESSES = 2
# Submits in flight at once, over all the front ends the benchmark plays. The row is the queue's
# capacity, so jobs must be waiting: with 64 in flight some always are, and a node that finishes
# a job claims the next in the same call (3 calls to the store per job, one of them the
# submit's). With 8, the front ends' round trips were the limit: the queue ran empty, the nodes
# idled and each job paid a wake-up and a claim on top (4 calls; 13 % more client CPU per job).
FEEDERS = 64
FEED_PROCESSES = 2


def _feed(url: str, jobs: int, go: Any, k: int = 0) -> None:
    """Front end `k` of FEED_PROCESSES: its share of FEEDERS submits in flight at once, each one
    enqueue (the script a front end runs), until its share of `jobs` is queued."""

    async def feed() -> None:
        store = Store(connect(url))
        queue = ClusterQueue(store)
        numbers = iter(range(k, jobs, FEED_PROCESSES))

        async def front_end() -> None:
            for n in numbers:
                job = f"bench{n:08d}xxxxxxxxxx"
                await queue.enqueue(job, f"c{n % 10}", RECORD, "h", b"u" * 200, "ip", 10**6, 10**9)

        go.wait()
        await asyncio.gather(*(front_end() for _ in range(FEEDERS // FEED_PROCESSES)))
        if await store.client.incr("jr:bench-feeders-done") == FEED_PROCESSES:
            await store.client.set("jr:bench-fed", b"1")
        await store.close()

    asyncio.run(feed())


async def persist(work: Callable[[], Awaitable[T]]) -> T:
    """As a node does: a call that timed out (a loaded machine) is made again."""
    while True:
        try:
            return await work()
        except ClusterUnavailable:
            continue


def _nodes(url: str, names: list[str], go: Any, ends: Any) -> None:
    """Simulated nodes of one slot each, on a connection of their own, doing what a node does:
    claim (an idle one waits for the wake-up, as a node does), then finish the job with its
    record and CPU and claim the next one in the same call. A job that ends within --start-after
    (0.25 s) writes no start, and any job mix passing 2,000 jobs/s through 100 nodes averages
    50 ms a job: these end at once. Each puts the time its last job
    finished into `ends` (the nodes wait up to a second to notice the end: not measured)."""

    async def node(name: str) -> float:
        store = Store(connect(url))
        queue = ClusterQueue(store)
        here = f"http://{name}"
        claimed = await persist(lambda: queue.claim(name, here))
        last = 0.0
        while True:
            if claimed is None:
                woken = await persist(lambda: queue.wait_for_work(1.0))
                fed = not woken and await store.client.get("jr:bench-fed")
                if fed and not await queue.length():
                    break
                claimed = await persist(lambda: queue.claim(name, here))
                continue
            job = claimed.job_id  # done at once: shorter than --start-after, it writes no start
            _, claimed = await persist(
                lambda job=job: queue.finish_and_claim(job, name, RECORD, 0.01, here)
            )
            last = time.monotonic()
        await store.close()
        return last

    async def all_nodes() -> None:
        go.wait()
        ends.put(max(await asyncio.gather(*(node(name) for name in names))))

    asyncio.run(all_nodes())


def redis_cpu(redis: RedisServer) -> float:
    """Seconds of CPU the redis-server has used."""
    found = dict(line.split(":", 1) for line in redis.cli("INFO", "cpu").split() if ":" in line)
    return float(found["used_cpu_user"]) + float(found["used_cpu_sys"])


def queue_throughput(redis: RedisServer, jobs: int = 10_000, nodes: int = 100) -> list[Row]:
    """Jobs/s through the queue's scripts: FEED_PROCESSES front-end processes enqueue, 100
    simulated nodes in PROCESSES processes claim, start and finish (with a record of a
    realistic size), from the start to the end of the last job; and the CPU per job of these
    processes (the clients) and of redis, which a loaded machine changes less than the jobs/s."""
    redis.cli("SADD", "jr:allowed", *(f"node{n}" for n in range(nodes)))
    go = multiprocessing.Event()
    ends: Any = multiprocessing.Queue()
    names = [f"node{n}" for n in range(nodes)]
    workers = [
        multiprocessing.Process(target=_nodes, args=(redis.url, names[k::PROCESSES], go, ends))
        for k in range(PROCESSES)
    ]
    feeders = [
        multiprocessing.Process(target=_feed, args=(redis.url, jobs, go, k))
        for k in range(FEED_PROCESSES)
    ]
    for process in [*feeders, *workers]:
        process.start()
    time.sleep(2)  # every process has imported and connected
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    redis_before = redis_cpu(redis)
    started = time.monotonic()
    go.set()
    last = max(ends.get(timeout=600) for _ in workers)
    for process in [*feeders, *workers]:
        process.join(600)
    redis_used = redis_cpu(redis) - redis_before
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the processes joined: counted
    clients = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    finished = int(redis.cli("EVAL", "return #redis.call('KEYS', 'jr:job:*')", "0"))
    return [
        Row(
            "cluster queue: 100 simulated nodes, one redis",
            finished / (last - started),
            "jobs/s",
            2000,
            higher_is_better=True,
        ),
        Row("cluster queue: the clients' CPU per job", clients * 1000 / finished, "ms"),
        Row("cluster queue: redis's CPU per job", redis_used * 1000 / finished, "ms"),
    ]


def memory_of_finished(redis: RedisServer, jobs: int = 10_000) -> float:
    """MB of used_memory for `jobs` finished jobs, each with a record and a short log."""
    redis.cli("FLUSHALL")
    before = int(redis.cli("INFO", "memory").split("used_memory:")[1].split()[0])

    async def fill() -> None:
        store = Store(connect(redis.url))
        queue = ClusterQueue(store)
        await store.client.sadd("jr:allowed", "n")
        record = msgspec.json.encode({"x": "y" * 650})
        for n in range(jobs):
            job = f"held{n:08d}xxxxxxxxxx"
            await queue.enqueue(
                job, f"c{n % 100}", record, "h" * 64, b"u" * 300, "ip", 10**6, 10**9
            )
            claimed = await queue.claim("n", "http://n")
            assert claimed is not None
            await queue.start(claimed.job_id, "n", record)
            await store.client.rpush(f"jr:log:{claimed.job_id}", b"dhello\n", b"ecompleted")
            await queue.finish(claimed.job_id, "n", record)
        await store.close()

    asyncio.run(fill())
    after = int(redis.cli("INFO", "memory").split("used_memory:")[1].split()[0])
    return (after - before) / 1e6


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def front_rss_growth(redis: RedisServer, reads: int = 2000) -> float:
    front = node(redis, 0)
    try:
        pid = front.process.proc.pid
        with httpx.Client(timeout=30) as client:
            for n in range(200):  # warm up
                client.get(f"{front.url}/status/held{n:08d}xxxxxxxxxx")
            before = rss_mb(pid)
            for n in range(reads):
                client.get(f"{front.url}/status/held{n % 10_000:08d}xxxxxxxxxx")
            return rss_mb(pid) - before
    finally:
        front.close()


def run() -> list[Row]:
    if os.geteuid() != 0 or shutil.which("redis-server") is None:
        return []
    folder = Path(tempfile.mkdtemp(prefix="jobrunner-bench-redis-"))
    redis = RedisServer(folder)
    rows: list[Row] = []
    try:
        # (a) 1 node of 4 slots, then 3 of them, on a fresh store each time.
        one = node(redis, 4)
        try:
            single = sleepers_per_second([one.url], 24)
        finally:
            one.close()
        redis.cli("FLUSHALL")
        three = [node(redis, 4) for _ in range(3)]
        embedded = Server(*GENEROUS, "--concurrency", "4")
        try:
            spread = sleepers_per_second([n.url for n in three], 72)
            # (d) hello world: the cluster (3 nodes) against embedded, in paired rounds.
            embedded_hello, cluster_hello, hello_ratio = hello_paired(embedded.url, three[0].url)
        finally:
            embedded.close()
            for server in three:
                server.close()
        rows += [
            Row("cluster: 1 node x 4 slots, 1 s jobs", single, "jobs/s"),
            Row("cluster: 3 nodes x 4 slots, 1 s jobs", spread, "jobs/s"),
            Row("cluster: 3 nodes / 1 node", spread / single, "x", 2.7, higher_is_better=True),
        ]
        # (b) the queue alone, then the submit latency of a front end against the embedded mode.
        redis.cli("FLUSHALL")
        rows += queue_throughput(redis)
        redis.cli("FLUSHALL")
        embedded = Server(*GENEROUS, "--concurrency", "1")
        front = node(redis, 0)
        try:
            embedded_submit, front_submit = submit_p50s(embedded.url, front.url)
        finally:
            embedded.close()
            front.close()
        rows += [
            Row("submit answered: embedded (p50)", embedded_submit, "ms"),
            Row("submit answered: cluster front end (p50)", front_submit, "ms"),
            Row("submit: added by the front end (p50)", front_submit - embedded_submit, "ms", 2),
        ]
        # (c) finished jobs held.
        rows.append(Row("store: 10,000 finished jobs", memory_of_finished(redis), "MB", 50))
        rows.append(Row("front end RSS growth over 2,000 reads", front_rss_growth(redis), "MB", 5))
        rows += [
            Row("hello world: embedded (median)", embedded_hello, "ms"),
            Row("hello world: cluster of 3 (median)", cluster_hello, "ms"),
            Row("hello world: cluster / embedded (median of paired rounds)", hello_ratio, "x", 1.3),
        ]
    finally:
        redis.kill()
        shutil.rmtree(folder, ignore_errors=True)
    return rows
