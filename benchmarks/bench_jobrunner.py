"""jobrunner: the floor of a job and the server's latency over it, throughput, event-loop
responsiveness and memory.

Every server here is started by the benchmark on 127.0.0.1; request counts are bounded.
"""

import asyncio
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from statistics import median

import aiohttp
import httpx

from jobrunner.client import Client
from jobrunner.client.library import _form as submit_form  # the body Client sends
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


class Floor:
    """What a hello-world job costs at the least, measured beside the server in the same run.

    Bare: the job's interpreter started as the jail starts it (`/venv/bin/python main.py` in the
    work dir, with the jail's environment variables), on the host, no jail. Jailed: the very
    command line the server runs for that job (`Sandbox.command`: setpriv, the cgroup-entering
    `sh`, nsjail with the policy and every per-job flag), with the job set up as the server sets
    it up (`Sandbox._prepare`: the tmpfs work dir with the inputs, the /proc files, the cgroups),
    timed from the spawn to the exit of that command only. The setup and the teardown are the
    server's own work, like the upload, the queue, the outputs and the signing: they count in
    what the server adds over the floor, not in the floor.
    """

    def __init__(self) -> None:
        from jobrunner.environments import Environments
        from jobrunner.sandbox import Sandbox

        self.state = Path(tempfile.mkdtemp(prefix="jobrunner-floor-", dir="/tmp"))
        self.state.chmod(0o711)
        self.sandbox = Sandbox.find(self.state)
        environments = Environments(self.sandbox.environments_root)
        environments.prepare()  # builds `default`, the environment of a job that names none
        self.environment = environments.path("default")
        self.count = 0

    def bare_ms(self) -> float:
        from jobrunner.sandbox.jail import BASE_ENV

        with tempfile.TemporaryDirectory(dir="/tmp") as work:
            (Path(work) / "main.py").write_bytes(HELLO)
            argv = [str(self.environment / "bin" / "python"), "main.py"]
            env = {**BASE_ENV, "PATH": f"{self.environment}/bin:/usr/bin:/bin", "HOME": work}
            start = time.perf_counter()
            subprocess.run(argv, cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
            return (time.perf_counter() - start) * 1000

    def jailed_ms(self) -> float:
        from jobrunner.sandbox import RunSpec

        self.count += 1
        job_id = f"floor-{self.count}"
        job_dir = self.state / "jobs" / job_id
        (job_dir / "inputs").mkdir(parents=True, mode=0o711)
        (job_dir / "inputs" / "main.py").write_bytes(HELLO)
        spec = RunSpec(  # what the service asks for a hello-world job with the default limits
            job_id=job_id,
            job_dir=job_dir,
            environment=self.environment,
            argv=["/venv/bin/python", "main.py"],
            env={},
            timeout=300,
            memory_bytes=512 * 2**20,
            cpu_seconds=300,
            storage_bytes=100 * 1_000_000,
            storage_inodes=10_000 + 1000,
            output_patterns=["**"],
            inputs={"main.py": hashlib.sha256(HELLO).hexdigest()},
            max_outputs=1000,
        )
        sandbox = self.sandbox
        work = sandbox.layout.work / job_id
        uid = sandbox.job_ids.take()
        try:
            job_cgroup, jail = sandbox._prepare(spec, work, uid, [])
            argv = sandbox.command(spec, job_cgroup, jail)
            start = time.perf_counter()
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
            elapsed = (time.perf_counter() - start) * 1000
            assert done.stdout == b"hello\n", (done.stdout, done.stderr)
            return elapsed
        finally:
            sandbox._cleanup(job_id, work)
            sandbox.job_ids.give_back(uid)
            shutil.rmtree(job_dir, ignore_errors=True)

    def close(self) -> None:
        self.sandbox.close()
        shutil.rmtree(self.sandbox.layout.root, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)


async def _submit_and_wait(client: Client) -> float:
    """Submit-to-completed as `jobrunner run` sees it, through its own client: the submit, then
    `Client.wait`'s long poll (`GET /status/ID?wait=60`), which the server answers when the job
    has finished."""
    start = time.perf_counter()
    job = await client.submit(entrypoint="main.py", tarball=tarball(HELLO))
    record = await client.wait(job.job_id)
    elapsed = (time.perf_counter() - start) * 1000
    assert record.status == "completed", record
    return elapsed


async def _submit_waiting(client: Client) -> float:
    """Submit-to-completed in one request (`POST /submit?wait=60`, `Client.submit_and_wait`):
    the answer is the job's final record."""
    start = time.perf_counter()
    record = await client.submit_and_wait(entrypoint="main.py", tarball=tarball(HELLO))
    elapsed = (time.perf_counter() - start) * 1000
    assert record.status == "completed", record
    return elapsed


async def _submit_and_wait_async(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> None:
    """`_submit_and_wait`, as one of many clients at once (each as itself: `headers` name it),
    with the requests `jobrunner.client.Client` makes, on aiohttp as it does."""
    form = submit_form(None, tarball(HELLO), entrypoint="main.py")
    async with session.post(
        f"{url}/submit", data=form.data, headers={**form.headers, **headers}
    ) as response:
        assert response.status == 200, await response.text()
        job = (await response.json())["job_id"]
    params = {"wait": "60"}
    async with session.get(f"{url}/status/{job}", params=params, headers=headers) as answer:
        record = await answer.json()
        assert record["status"] == "completed", record


async def _submit_waiting_async(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> None:
    """`_submit_waiting` as one of many clients: one request, `POST /submit?wait=60`."""
    form = submit_form(None, tarball(HELLO), entrypoint="main.py")
    params = {"wait": "60"}
    async with session.post(
        f"{url}/submit", data=form.data, params=params, headers={**form.headers, **headers}
    ) as answer:
        record = await answer.json()
        assert record["status"] == "completed", record


def latency(rounds: int = 60) -> list[Row]:
    """Hello world on an idle server against its floor (`Floor`), sampled in turn, round by
    round, so that both see the same load of a shared machine."""
    floor = Floor()
    server = Server("--rate-per-hour", "100000", "--rate-cpu-seconds", "100000")
    bare: list[float] = []
    jailed: list[float] = []
    served: list[float] = []
    one: list[float] = []

    async def measure() -> None:
        async with Client(server.url) as client:
            for _ in range(3):  # warm: the first runs fill caches
                floor.bare_ms(), floor.jailed_ms(), await _submit_and_wait(client)
                await _submit_waiting(client)
            for round_ in range(rounds):
                bare.append(floor.bare_ms())
                jailed.append(floor.jailed_ms())
                # Both ways of a client, in turn first: neither always follows the floor's run.
                if round_ % 2:
                    served.append(await _submit_and_wait(client))
                    one.append(await _submit_waiting(client))
                else:
                    one.append(await _submit_waiting(client))
                    served.append(await _submit_and_wait(client))

    try:
        asyncio.run(measure())
    finally:
        server.close()
        floor.close()
    rounds_of = list(zip(bare, jailed, served, one, strict=True))

    def median_of(value: Callable[[float, float, float, float], float]) -> float:
        return median(value(*each) for each in rounds_of)

    # The differences and the ratio are taken round by round (each round's three runs follow one
    # another, so they see the same load) and their median is printed: on a shared machine the
    # load moves within a run, and a ratio of two medians then mixes samples of different loads.
    return [
        Row("bare interpreter start, hello world `python main.py` (median)", median(bare), "ms"),
        Row("floor: the same job's jail run directly, no server (median)", median(jailed), "ms"),
        Row(
            "sandbox overhead: floor minus bare interpreter (median of rounds)",
            median_of(lambda bare, jailed, _, __: jailed - bare),
            "ms",
            20,
        ),
        Row(
            "submit-to-completed, hello world, idle server, submit + long poll (median)",
            median(served),
            "ms",
            150,
        ),
        Row(
            "  server overhead: submit + long poll minus floor (median of rounds)",
            median_of(lambda _, jailed, served, __: served - jailed),
            "ms",
        ),
        Row(
            "submit-to-completed over the floor, submit + long poll (median of rounds)",
            median_of(lambda _, jailed, served, __: served / jailed),
            "x",
            1.25,
        ),
        Row(
            "submit-to-completed, one request, POST /submit?wait=60 (median)",
            median(one),
            "ms",
            150,
        ),
        Row(
            "  server overhead: one request minus floor (median of rounds)",
            median_of(lambda _, jailed, __, one: one - jailed),
            "ms",
        ),
        Row(
            "submit-to-completed over the floor, one request (median of rounds)",
            median_of(lambda _, jailed, __, one: one / jailed),
            "x",
            1.25,
        ),
    ]


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process's own CPU, its reaped children's) in seconds: for the server, what it spent
    itself and what its jails spent (it reaps each nsjail with wait4)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, (int(fields[13]) + int(fields[14])) / ticks


def throughput() -> list[Row]:
    """Trivial jobs from 40 client addresses (through a trusted proxy), default per-IP limits and
    slots (one per core): first with each client submitting and then waiting as `jobrunner
    submit` does (two requests a job), then with one request a job (`POST /submit?wait=60`).

    The clients run in this process, on the same cores as the server and its jails: their CPU
    is printed too. They speak through aiohttp, as `jobrunner.client` does (httpx, used here
    before, took 4 to 5.5 ms of CPU per job against aiohttp's 1.1 to 1.9 ms: an eighth of a
    2-core machine's time went to the load generator rather than to the server)."""
    return [
        *_throughput(_submit_and_wait_async, "submit + long poll"),
        *_throughput(_submit_waiting_async, "one request"),
    ]


def _throughput(
    job: Callable[[aiohttp.ClientSession, str, dict[str, str]], Awaitable[None]], way: str
) -> list[Row]:
    server = Server("--trusted-proxy", "127.0.0.1")
    jobs = 120
    try:

        async def measure() -> float:
            connector = aiohttp.TCPConnector(limit=80)
            timeout = aiohttp.ClientTimeout(total=120)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

                async def client_ip(number: int) -> None:
                    headers = {"X-Forwarded-For": f"198.51.100.{number}"}
                    for _ in range(jobs // 40):
                        await job(session, server.url, headers)

                start = time.perf_counter()
                await asyncio.gather(*(client_ip(n) for n in range(40)))
                return time.perf_counter() - start

        pid = server.process.proc.pid
        before, clients_before = _cpu_seconds(pid), time.process_time()
        elapsed = asyncio.run(measure())
        after, clients_after = _cpu_seconds(pid), time.process_time()
    finally:
        server.close()
    own, jails = ((a - b) * 1000 / jobs for a, b in zip(after, before, strict=True))
    return [
        Row(
            f"throughput, {jobs} trivial jobs from 40 addresses, {way}",
            jobs / elapsed,
            "jobs/s",
            70,
            higher_is_better=True,
        ),
        Row("  server CPU per job in that run (its own)", own, "ms"),
        Row("  jails' CPU per job in that run (setpriv, sh, nsjail, the job)", jails, "ms"),
        Row(
            "  clients' CPU per job in that run (this process, same cores)",
            (clients_after - clients_before) * 1000 / jobs,
            "ms",
        ),
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
        latency,
        throughput,
        status_latency_under_load,
        memory_with_queue,
    ):
        rows += measure()
    return rows
