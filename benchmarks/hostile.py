"""`make bench-hostile`: issues 10 and 22's scenario. A bounded mixed load on loopback against a
real server with the real sandbox: does hostile traffic slow down the normal users of a server?

Normal users are 20 client IPs, each submitting a small job, waiting for its result, then pausing
for a random think time (2 s on average, the same seeded sequence in every phase): about 40 % of
what this server completes per second when flooded, so a queue only forms when something takes
capacity away. The scenario runs three phases on one server:

1. idle: 30 jobs one after the other from one client (the latency floor, for reference);
2. unloaded: the 20 normal users alone for SECONDS;
3. loaded: the same 20 users for SECONDS while, for the whole window, these attackers run, each
   from its own IPs:
   - issue 10's: a fork bomb that first writes an 8 MiB log holds its slot (the window is its time
     limit), 5 WebSocket followers of that live log never read (each is replaced by a new one when
     the server drops it), 5 uploads trickle a few bytes a second (each is reopened when the
     server times it out), and a memory bomb and a job writing a non-UTF-8 output name run (with
     the window as their limit too);
   - issue 22's: `pattern`, one job at a time (a normal user's pause between them) that leaves
     one output named of 70 `a`s and asks for the outputs `**a**a**a**a**a**a**a**c` (a regex
     that backtracks ~10^9 times holding the GIL while the outputs are copied out); `h2`, an
     HTTP/2 connection with prior knowledge to the plain-HTTP port asking for a 10 MB output on
     100 streams and never sending WINDOW_UPDATE, held until the server closes it, then opened
     again; `downloads`, 200 HTTP/1.1 downloads of that output from one IP through sockets with a
     tiny receive buffer that never read past the status line, each reopened when the server
     drops it; `parts`, 3 IPs x 2 uploads at a time of 60 parts each, every part an archive of 23
     pax global headers of 64 KiB of `5 a=\n` records (3 KB gzipped, ~300,000 records to parse),
     each upload sent again when answered; and issue 23's `sleepers`, 3 IPs x 2 jobs at a time
     (the per-IP concurrent limit) that sleep past their 15 s time limit, each submitted again
     the moment it ends: clients whose jobs hold their slot for their whole limit, within every
     limit they have. Before the window, a job writes the 10 MB output
     (`big.bin`, plus a file nobody downloads, so that the job is kept for the retention time
     rather than deleted 60 s after its one output was downloaded).

The hostile jobs are the issues' lists and nothing else. An earlier version gave the followers a
job of their own that slept for the window: a fourth long job, not hostile (any server owes a
sleeping job its slot), that left the normal users one slot of four until the memory bomb ended.
For the same reason every attacker is paced: one `pattern` job at a time with a pause, at most
one upload a second per uploader and one reopened socket a second per download: what they take is
what the server gives them, not capacity any client is owed.

The target compares phase 3 with phase 2: hostile traffic may make the normal users' p99 latency
(submit to finished, queueing included) at most 1.25 times what it was without (issue 23; it was
twice before the queue was fair). The loaded p99 against the idle p99 (the
stricter reading of "unloaded") is printed beside it. Also printed: every normal job completed,
their time in the sandbox (interference without the queue), the server's RSS peak and its open
fds before and after the loaded phase (and their peak), and the CPU seconds the server process
itself used in each phase (the jobs run in their own processes and are not counted). On stderr,
one line per attacker says how the server answered it (`h2: 1 connections opened, 100 streams
asked, 100 streams answered 200, ...`, `parts: 4 answered 400, ...; answered in p50 9000 ms`).
An attacker never stops the scenario: refusals, resets and closes are counted, not raised.

Why users who pause and not a flood: with every client submitting again the moment its job ends,
4 slots serve a queue of 20 and the latency is the queue's length, whatever the hostile jobs do;
that measures throughput (`make bench` does), not interference.

`python benchmarks/hostile.py [SECONDS]` (60 by default). Needs root (nsjail). To see what each
attack costs, `HOSTILE=fork,memory,bad-name,followers,uploads,pattern,h2,downloads,parts,sleepers`
(the default: all) picks parts (the followers follow the fork bomb's log, so `followers` brings the
fork bomb); `HOSTILE_TRACE=FILE` writes a line per normal job (its start in the phase, latency,
time in the sandbox) and one per hostile job; `HOSTILE_SERVER_LOG=FILE` keeps the server's log.
"""

import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import resource
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from jobrunner.client.library import _form as submit_form  # noqa: E402 -- the body Client sends
from run import Row, print_table  # noqa: E402
from support.hostiletar import pax_globals  # noqa: E402
from support.jobclient import tarball  # noqa: E402
from support.servers import ServerProcess  # noqa: E402

BIN = Path(sys.executable).parent
CLIENTS = 20
PARTS = (
    "fork",
    "memory",
    "bad-name",
    "followers",
    "uploads",
    "pattern",
    "h2",
    "downloads",
    "parts",
    "sleepers",
)
THINK_SECONDS = 2.0  # a normal user's mean pause between a result and the next submission
STALL_SECONDS = 5  # the server's follower stall limit in this scenario
WAIT = 30  # seconds a status request may wait for the job to end (at most 60)
NORMAL = "print(sum(range(100000)))\n"
FORK_BOMB = (  # an 8 MiB log for the followers first
    "import os, sys\nline = 'h' * 1023 + '\\n'\nfor _ in range(8 * 1024):\n"
    "    sys.stdout.write(line)\nsys.stdout.flush()\n"
    "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)
MEMORY_BOMB = "blocks = []\nwhile True:\n    blocks.append(bytearray(2**20))\n"
BAD_NAME = "open(b'out-\\xff.txt', 'wb').write(b'x')\nopen('ok.txt', 'w').write('ok')\n"
# 10 MB to download, and a file nobody downloads: a job whose every output was downloaded is
# deleted 60 s later, and the attackers must have something to ask for until the window ends.
BIG = "big.bin"
BIG_JOB = f"open('{BIG}', 'wb').write(bytes(10 * 2**20))\nopen('keep.txt', 'w').write('kept')\n"
PATTERN_JOB = "open('a' * 70, 'w').write('a')\n"
# Never matches 70 a's, but `.*a.*a...c` tries ~C(70,7) ways before a backtracking regex says so.
PATTERN = "**a**a**a**a**a**a**a**c"
H2_STREAMS = 100  # hypercorn's default SETTINGS_MAX_CONCURRENT_STREAMS
DOWNLOADS = 200
UPLOADERS = 2  # per IP: the per-IP concurrent limit, as an upload holds a slot
UPLOAD_PARTS = 60
SLEEPER_IPS = 3
SLEEPER_LIMIT = 15  # each sleeping job's time limit: it holds its slot that long, then times out
SLEEP = "import time\ntime.sleep(3600)\n"
TCP_ESTABLISHED = 1  # tcpi_state in TCP_INFO


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    """The process's own user and system time (not its children's: the jobs')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds(pid: int) -> float:
    """User and system time of the process's children it has reaped: for the server, its jobs
    (it reaps each nsjail with wait4, and nsjail its jail)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def host_busy_seconds() -> float:
    """CPU seconds the host's CPUs have spent running anything (user, nice, system, irq,
    softirq: not idle, iowait, nor the hypervisor's steal) since boot, summed over the CPUs."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(value) for value in first[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))] if ordered else 0.0


async def submit_reply(
    client: httpx.AsyncClient,
    url: str,
    code: str,
    ip: str,
    timeout: int = 30,
    outputs: list[str] | None = None,
) -> httpx.Response:
    manifest: dict[str, object] = {"entrypoint": "main.py", "timeout": timeout}
    if outputs is not None:
        manifest["outputs"] = outputs
    return await client.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", tarball({"main.py": code}))},
        data={"manifest": json.dumps(manifest)},
        headers={"X-Forwarded-For": ip},
    )


async def submit(
    client: httpx.AsyncClient, url: str, code: str, ip: str, timeout: int = 30
) -> str | None:
    reply = await submit_reply(client, url, code, ip, timeout)
    return reply.json()["job_id"] if reply.status_code == 200 else None


async def run_job(
    client: httpx.AsyncClient, url: str, code: str, ip: str, timeout: int = 30
) -> tuple[float, dict | None]:
    """Submit as `ip` and wait until finished: (seconds, record) or (seconds, None) if refused."""
    started = time.monotonic()
    job_id = await submit(client, url, code, ip, timeout)
    if job_id is None:
        return time.monotonic() - started, None
    return await finished(client, url, job_id, ip, started)


async def finished(
    client: httpx.AsyncClient, url: str, job_id: str, ip: str, started: float
) -> tuple[float, dict]:
    """Wait until the job has finished: (seconds since `started`, its record). As the client
    library does, with `?wait=`: the server answers when the job ends, so the latency is not
    rounded up to a polling interval and no poll costs the server or this process CPU. From the
    submitter's address, as a waiting request counts against its client's stream limit."""
    while True:
        reply = await client.get(
            f"{url}/status/{job_id}", params={"wait": WAIT}, headers={"X-Forwarded-For": ip}
        )
        if reply.status_code != 200:  # counted as an error by the caller
            raise ValueError(f"status answered {reply.status_code}: {reply.text[:200]}")
        record = reply.json()
        if record["status"] in ("completed", "failed"):
            return time.monotonic() - started, record


@dataclass
class Phase:
    """What the normal users saw in one phase."""

    latencies: list[float] = field(default_factory=list)  # submit to finished
    walls: list[float] = field(default_factory=list)  # time in the sandbox
    submitted: int = 0
    refused: int = 0
    failed: int = 0
    errors: int = 0  # no answer in time, or the connection failed: the server was unusable
    trace: list[str] = field(default_factory=list)  # one line per job, for HOSTILE_TRACE

    def count(self, line: str, took: float, record: dict | None) -> None:
        wall = record["wall_seconds"] if record else None
        self.trace.append(f"{line} took={took:.3f} wall={wall}")
        if record is None:
            self.refused += 1
        elif record["status"] == "completed":
            self.latencies.append(took)
            self.walls.append(record["wall_seconds"])
        else:
            self.failed += 1


async def normal_job(
    session: aiohttp.ClientSession, url: str, ip: str
) -> tuple[float, dict | None]:
    """One normal user's job, submitted as `ip` and waited for with `?wait=`: `run_job` with the
    requests `jobrunner.client.Client` makes, on aiohttp as it does. (seconds, record), or
    (seconds, None) if refused."""
    started = time.monotonic()
    form = submit_form(None, tarball({"main.py": NORMAL}), entrypoint="main.py", timeout=30)
    headers = {"X-Forwarded-For": ip}
    async with session.post(
        f"{url}/submit", data=form.data, headers={**form.headers, **headers}
    ) as reply:
        if reply.status != 200:
            return time.monotonic() - started, None
        job_id = (await reply.json())["job_id"]
    while True:
        params = {"wait": WAIT}
        async with session.get(f"{url}/status/{job_id}", params=params, headers=headers) as reply:
            if reply.status != 200:  # counted as an error by the caller
                raise ValueError(f"status answered {reply.status}: {(await reply.text())[:200]}")
            record = await reply.json()
        if record["status"] in ("completed", "failed"):
            return time.monotonic() - started, record


async def normal_users(session: aiohttp.ClientSession, url: str, seconds: float) -> Phase:
    phase = Phase()
    start = time.monotonic()
    deadline = start + seconds

    async def user(n: int) -> None:
        think = random.Random(n)  # the same pauses in every phase
        await asyncio.sleep(think.uniform(0, THINK_SECONDS))  # users do not start in step
        while time.monotonic() < deadline:
            phase.submitted += 1
            line = f"{time.monotonic() - start:.3f} user={n}"
            try:
                took, record = await normal_job(session, url, f"10.5.0.{n}")
            except (aiohttp.ClientError, TimeoutError, ValueError) as error:  # counted
                phase.errors += 1
                phase.trace.append(f"{line} error={error!r}")
            else:
                phase.count(line, took, record)
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


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@dataclass
class Answers:
    """How the server answered one attacker: a count per kind of answer, and how long answers
    took. Attackers count what happens to them and never raise: the scenario must go on."""

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)

    def add(self, answer: str, count: int = 1, took: float | None = None) -> None:
        self.counts[answer] = self.counts.get(answer, 0) + count
        if took is not None:
            self.seconds.append(took)

    def line(self) -> str:
        text = ", ".join(f"{count} {answer}" for answer, count in self.counts.items())
        if self.seconds:
            text += (
                f"; answered in p50 {percentile(self.seconds, 0.5) * 1000:.0f} ms, "
                f"max {max(self.seconds) * 1000:.0f} ms"
            )
        return f"{self.name}: {text or 'nothing happened'}"


async def pattern_jobs(url: str, ip: str, until: float, answers: Answers) -> None:
    """One job at a time, with a normal user's pause between them, until `until`: its one
    output must be matched against PATTERN when it is copied out."""
    async with httpx.AsyncClient(timeout=60) as client:
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                async with asyncio.timeout(until - started):
                    reply = await submit_reply(client, url, PATTERN_JOB, ip, 10, [PATTERN])
                    answer = f"answered {reply.status_code}"
                    if reply.status_code == 200:
                        _, record = await finished(client, url, reply.json()["job_id"], ip, started)
                        answer = record["failure"] or record["status"]
                answers.add(answer, took=time.monotonic() - started)
            except TimeoutError:
                answers.add("unfinished at the window's end")
            except (httpx.HTTPError, ValueError) as error:
                answers.add(type(error).__name__)
            await asyncio.sleep(min(THINK_SECONDS, max(0.0, until - time.monotonic())))


async def sleeper(url: str, ip: str, until: float, answers: Answers) -> None:
    """One job at a time that sleeps past its SLEEP_LIMIT s time limit, submitted again the
    moment it ends, until `until` (two of these per IP: the per-IP concurrent limit). The
    answers' times are each job's wait for its start."""
    async with httpx.AsyncClient(timeout=60) as client:
        while time.monotonic() < until:
            submitted = time.monotonic()
            job_id = None
            try:
                async with asyncio.timeout(until - submitted):
                    reply = await submit_reply(client, url, SLEEP, ip, SLEEPER_LIMIT)
                    if reply.status_code != 200:
                        answers.add(f"answered {reply.status_code}")
                        await asyncio.sleep(1)
                        continue
                    job_id = reply.json()["job_id"]
                    status = f"{url}/status/{job_id}"
                    while (record := (await client.get(status)).json())["status"] == "queued":
                        await asyncio.sleep(0.5)  # a patient client's polling interval
                    answers.add("started", took=time.monotonic() - submitted)
                    while record["status"] == "running":
                        await asyncio.sleep(0.5)
                        record = (await client.get(status)).json()
                    answers.add(record["failure"] or record["status"])
            except TimeoutError:
                answers.add("unfinished at the window's end")
                if job_id:  # gone with the window, so the server's files are counted without it
                    with contextlib.suppress(httpx.HTTPError):
                        await client.delete(f"{url}/jobs/{job_id}")
            except (httpx.HTTPError, ValueError) as error:
                answers.add(type(error).__name__)
                await asyncio.sleep(1)


async def h2_streams(url: str, path: str, ip: str, until: float, answers: Answers) -> None:
    """HTTP/2 with prior knowledge on the plain-HTTP port: H2_STREAMS downloads of `path` on one
    connection that never opens a flow-control window, held until the server ends it; then a new
    one (at most two a second), until `until`."""
    while time.monotonic() < until:
        opened = time.monotonic()
        answers.add("connections opened")
        try:
            async with asyncio.timeout(until - opened):
                answers.add(await h2_connection(url, path, ip, answers))
        except TimeoutError:  # before OSError, which it is
            answers.add("held to the window's end")
        except h2.exceptions.H2Error as error:
            answers.add(f"answered not in HTTP/2 ({type(error).__name__})")
        except OSError as error:
            answers.add(type(error).__name__)
        await asyncio.sleep(max(0.0, opened + 0.5 - time.monotonic()))


async def h2_connection(url: str, path: str, ip: str, answers: Answers) -> str:
    """Ask, then take what comes until the server closes the connection: how it ended."""
    host, port = address(url)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        connection.initiate_connection()
        headers = [
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", f"{host}:{port}"),
            (":path", path),
            ("x-forwarded-for", ip),
        ]
        for _ in range(H2_STREAMS):
            connection.send_headers(connection.get_next_available_stream_id(), headers, True)
        answers.add("streams asked", H2_STREAMS)
        writer.write(connection.data_to_send())
        await writer.drain()
        while data := await reader.read(65536):
            if data.startswith(b"HTTP/"):  # h2 would wait for the rest of a huge "frame"
                return f"answered in HTTP/1 {status_of(data)}"
            for event in connection.receive_data(data):
                count_h2_event(event, answers)
            # Acknowledgements of settings and pings only: received data is never acknowledged
            # (acknowledge_received_data), so h2 sends no WINDOW_UPDATE.
            writer.write(connection.data_to_send())
            await writer.drain()
        return "closed by the server"
    finally:
        writer.close()


def count_h2_event(event: h2.events.Event, answers: Answers) -> None:
    if isinstance(event, h2.events.ResponseReceived):
        status = dict(event.headers or []).get(b":status", b"?")
        answers.add(f"streams answered {status.decode(errors='replace')}")
    elif isinstance(event, h2.events.DataReceived):
        answers.add("body bytes received", len(event.data or b""))
    elif isinstance(event, h2.events.StreamReset):
        answers.add("streams reset")
    elif isinstance(event, h2.events.ConnectionTerminated):
        answers.add("GOAWAY")


async def unread_download(url: str, path: str, ip: str, until: float, answers: Answers) -> None:
    """One download at a time through a socket with a tiny receive buffer that reads the status
    line and nothing more, held until the server drops it; then a new one (at most one a
    second), until `until`."""
    host, port = address(url)
    loop = asyncio.get_running_loop()
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Forwarded-For: {ip}\r\n\r\n".encode()
    while time.monotonic() < until:
        opened = time.monotonic()
        with socket.socket() as sock:
            sock.setblocking(False)
            # Before connecting, so that the window announced in the handshake is small too.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            try:
                async with asyncio.timeout(until - opened):
                    await loop.sock_connect(sock, (host, port))
                    await loop.sock_sendall(sock, request)
                    head = await loop.sock_recv(sock, 12)  # b"HTTP/1.1 200"
                    answers.add(f"answered {status_of(head)}" if head else "closed unanswered")
                    while tcp_state(sock) == TCP_ESTABLISHED:  # unread: only the state tells
                        await asyncio.sleep(1)
                answers.add("closed by the server")
            except TimeoutError:  # before OSError, which it is
                answers.add("held to the window's end")
            except OSError as error:
                answers.add(type(error).__name__)
        await asyncio.sleep(max(0.0, opened + 1 - time.monotonic()))


def status_of(head: bytes) -> str:
    """The status code of an HTTP/1 answer that starts with `head` (`HTTP/1.1 200 OK`)."""
    return head[9:12].decode(errors="replace")


def tcp_state(sock: socket.socket) -> int:
    """The connection's TCP state (tcpi_state, the first byte of TCP_INFO): a peer's FIN or RST
    shows here even while unread data waits in the buffer."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


async def part_uploads(url: str, ip: str, part: bytes, until: float, answers: Answers) -> None:
    """Uploads of UPLOAD_PARTS copies of `part` and no entrypoint (a 400 once unpacked), one at
    a time and at most one a second, each sent again when answered, until `until`."""
    files = [("files", (f"part{n}.tar.gz", part)) for n in range(UPLOAD_PARTS)]
    manifest = {"manifest": '{"entrypoint": "main.py"}'}
    async with httpx.AsyncClient(timeout=None) as client:  # the window bounds the wait
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                async with asyncio.timeout(until - started):
                    reply = await client.post(
                        f"{url}/submit", files=files, data=manifest, headers={"X-Forwarded-For": ip}
                    )
                took = time.monotonic() - started
                answers.add(f"answered {reply.status_code}", took=took)
            except TimeoutError:
                answers.add("unanswered at the window's end")
            except httpx.HTTPError as error:
                answers.add(type(error).__name__)
            await asyncio.sleep(max(0.0, started + 1 - time.monotonic()))


async def big_download(client: httpx.AsyncClient, url: str) -> str | None:
    """The path of a 10 MB output to download, from a job of its own IP; None if it failed."""
    _, record = await run_job(client, url, BIG_JOB, "10.6.0.3")
    if record is None or record["status"] != "completed":
        print(f"the 10 MB job did not complete: {record}", file=sys.stderr)
        return None
    return f"/download/{record['job_id']}/{BIG}"


def remote_attacks(
    url: str, parts: set[str], fork: str | None, download: str | None, until: float
) -> tuple[list[asyncio.Task[None]], list[Answers]]:
    """Start the attackers that `parts` names and that need no job of their own in the users'
    process (issue 10's followers of the fork bomb `fork` and trickling uploads, and issue
    22's), each from its own IPs."""
    tasks: list[asyncio.Task[None]] = []
    answers: list[Answers] = []

    def attack(name: str) -> Answers:
        answers.append(Answers(name))
        return answers[-1]

    if fork is not None and "followers" in parts:
        tasks += [asyncio.create_task(non_reader(url, fork, until)) for _ in range(5)]
    if "uploads" in parts:
        tasks += [asyncio.create_task(slow_upload(url, f"10.7.0.{n}", until)) for n in range(5)]
    if "pattern" in parts:
        tasks.append(asyncio.create_task(pattern_jobs(url, "10.6.0.4", until, attack("pattern"))))
    if download is not None and "h2" in parts:
        h2_seen = attack("h2")
        tasks.append(asyncio.create_task(h2_streams(url, download, "10.6.0.5", until, h2_seen)))
    if download is not None and "downloads" in parts:
        seen = attack("downloads")
        tasks += [
            asyncio.create_task(unread_download(url, download, "10.6.0.6", until, seen))
            for _ in range(DOWNLOADS)
        ]
    if "parts" in parts:
        seen = attack("parts")
        part = pax_globals()
        tasks += [
            asyncio.create_task(part_uploads(url, f"10.8.0.{n}", part, until, seen))
            for n in range(3)
            for _ in range(UPLOADERS)
        ]
    if "sleepers" in parts:
        seen = attack("sleepers (seconds to start)")
        tasks += [
            asyncio.create_task(sleeper(url, f"10.6.1.{n}", until, seen))
            for n in range(SLEEPER_IPS)
            for _ in range(2)
        ]
    return tasks, answers


def yield_the_cpu() -> None:
    """Let this process have only the CPU time that the server, its jobs and the users leave.

    `nice 19` alone did not: a nice value weighs a process against the others of its own
    scheduling group, and the jobs run in cgroups of their own, beside the group of this
    benchmark's session (its autogroup, with the kernel's `sched_autogroup_enabled`, or the root
    cgroup), which weighs as much as a job's whatever its processes' nice values. Measured on
    this project's host (cgroup v1), two busy loops on one core, 3 s: a job's cgroup 153 ticks
    against 137 for a nice-19 loop of this session; against a loop in a session of its own, at
    autogroup nice 19 and SCHED_IDLE, 283 against 7. So: a session (and autogroup) of its own at
    the lowest weight, and the idle policy, which any runnable task preempts on waking."""
    with contextlib.suppress(OSError):  # already a session leader: keep the session
        os.setsid()
    with contextlib.suppress(OSError):  # a kernel without autogroups
        Path("/proc/self/autogroup").write_text("19")
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    os.nice(19)


def attack_from_own_process(
    url: str, parts: set[str], download: str | None, orders: Any, results: Any
) -> None:
    """The socket attackers in a process of their own, as they would be on another machine: in
    the users' process, hundreds of attacking sockets delayed the users' own event loop, and
    their latency counted the load generator's lag as the server's. Answers go to `results`.

    At the lowest priority (`yield_the_cpu`), for the same reason: on another machine the
    attackers' own CPU (5 to 7 CPU-s in a quiet 60 s window, beside the server's 11) would not be
    taken from the server's cores. Here it runs on what the server, its jobs and the users leave
    idle, and the stderr lines show what each attacker still did.

    Started before the window: it says it is ready (with the CPU its start took) and waits for
    `orders` (the fork bomb's job id and the window's end). Started with the window, its
    interpreter and imports (0.4 CPU-s, at normal priority until `yield_the_cpu`) ran in the
    window's first half second: the benchmark's own start-up, which an attacker on another
    machine does not take from the server's cores, was the slowest normal jobs of the phase."""
    yield_the_cpu()
    results.put(time.process_time())
    fork, until = orders.get()

    async def main() -> list[Answers]:
        tasks, answers = remote_attacks(url, parts, fork, download, until)
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(outcome, BaseException):  # a bug in an attacker: say so, go on
                print(f"an attacker stopped early: {outcome!r}", file=sys.stderr)
        return answers

    results.put(asyncio.run(main()))


async def scenario(url: str, pid: int, seconds: float) -> list[Row]:
    window = int(seconds)
    parts = set(os.environ.get("HOSTILE", ",".join(PARTS)).split(","))
    # The normal users speak as `jobrunner.client` does (aiohttp); the attackers through httpx
    # and raw sockets. (With httpx the users' process took 5 to 6 ms of CPU per job on the
    # server's two cores, with aiohttp 2 to 2.5 ms.)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=60, sock_read=60 + float(WAIT))
    async with (
        httpx.AsyncClient(timeout=60) as client,
        aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as users,
    ):
        idle = [await normal_job(users, url, "10.9.0.1") for _ in range(30)]
        print("idle done; unloaded phase ...", file=sys.stderr, flush=True)
        cpu_start, own_start = cpu_seconds(pid), time.process_time()
        jails_start, host_start = children_cpu_seconds(pid), host_busy_seconds()
        phase_start = time.monotonic()
        unloaded = await normal_users(users, url, seconds)
        wall_unloaded = time.monotonic() - phase_start
        cpu_unloaded = cpu_seconds(pid) - cpu_start
        own_unloaded = time.process_time() - own_start
        jails_unloaded = children_cpu_seconds(pid) - jails_start
        host_unloaded = host_busy_seconds() - host_start
        print("unloaded done; loaded phase ...", file=sys.stderr, flush=True)
        download = await big_download(client, url) if parts & {"h2", "downloads"} else None
        spawn = multiprocessing.get_context("spawn")
        orders, results = spawn.Queue(), spawn.Queue()
        attackers = spawn.Process(
            target=attack_from_own_process, args=(url, parts, download, orders, results)
        )
        attackers.start()
        attackers_start: float = await asyncio.to_thread(results.get, True, 120)
        fds_before = fds(pid)
        peak = rss(pid)
        peak_fds = fds_before
        cpu_start, own_start = cpu_seconds(pid), time.process_time()
        jails_start, host_start = children_cpu_seconds(pid), host_busy_seconds()
        reaped_start = resource.getrusage(resource.RUSAGE_CHILDREN)
        phase_start = time.monotonic()
        until = time.monotonic() + seconds
        bombs: dict[str, asyncio.Task[tuple[float, dict | None]]] = {}
        fork = None
        if parts & {"fork", "followers"}:
            fork = await submit(client, url, FORK_BOMB, "10.6.0.0", timeout=window)
            assert fork is not None, "the fork bomb was refused"
            bombs["fork"] = asyncio.create_task(
                finished(client, url, fork, "10.6.0.0", time.monotonic())
            )
        orders.put((fork, until))
        for n, (name, code) in enumerate((("memory", MEMORY_BOMB), ("bad-name", BAD_NAME)), 1):
            if name in parts:
                bombs[name] = asyncio.create_task(
                    run_job(client, url, code, f"10.6.0.{n}", timeout=window)
                )

        async def sample() -> None:
            nonlocal peak, peak_fds
            while True:
                peak = max(peak, rss(pid))
                peak_fds = max(peak_fds, fds(pid))
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample())
        loaded = await normal_users(users, url, seconds)
        bomb_records = await asyncio.gather(*bombs.values())
        cpu_loaded = cpu_seconds(pid) - cpu_start
        own_loaded = time.process_time() - own_start
        jails_loaded = children_cpu_seconds(pid) - jails_start
        host_loaded = host_busy_seconds() - host_start
        wall_loaded = time.monotonic() - phase_start
        answers: list[Answers] = await asyncio.to_thread(results.get, True, 120)
        await asyncio.to_thread(attackers.join, 30)
        # The attackers' process, now reaped (the server, this process's other child, is not).
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        attackers_loaded = (
            (reaped.ru_utime + reaped.ru_stime)
            - (reaped_start.ru_utime + reaped_start.ru_stime)
            - attackers_start
        )  # its start-up came before the window
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    # A job still running holds files (its pidfd, its log); the attackers' last ones end within
    # their time limits. Then connections close as the server notices.
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(1200):
            if (await client.get("/stats")).json()["system"]["active_jobs"] == 0:
                break
            await asyncio.sleep(0.1)
    fds_after = fds(pid)
    for _ in range(100):
        if fds_after <= fds_before:
            break
        await asyncio.sleep(0.1)
        fds_after = fds(pid)
    bomb_text = ", ".join(
        f"{name}: {record['failure'] or record['status'] if record else 'refused'}"
        for name, (_, record) in zip(bombs, bomb_records, strict=True)
    )
    print(f"hostile jobs: {bomb_text}", file=sys.stderr)
    for seen in answers:
        print(seen.line(), file=sys.stderr)
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
            f"({phase.refused} refused, {phase.failed} failed, {phase.errors} errors)",
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
        Row(
            "hostile: loaded jobs not completed",
            loaded.refused + loaded.failed + loaded.errors,
            "jobs",
            0,
        ),
        Row("hostile: loaded p50", percentile(loaded.latencies, 0.5) * 1000, "ms"),
        Row("hostile: loaded p99", loaded_p99 * 1000, "ms", 1.25 * unloaded_p99 * 1000),
        Row("hostile: loaded p99 / unloaded p99", loaded_p99 / unloaded_p99, "x", 1.25),
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
        Row("hostile: fds peak", peak_fds, "fds"),
        Row("hostile: fds after", fds_after, "fds", fds_before),
        Row("hostile: server CPU, unloaded phase", cpu_unloaded, "s"),
        Row("hostile: server CPU, loaded phase", cpu_loaded, "s"),
        # The load generator shares this machine: the users' process's own CPU per phase (the
        # earlier attacks run in it too; issue 22's attackers have a process of their own).
        Row("hostile: users' process CPU, unloaded phase", own_unloaded, "s"),
        Row("hostile: users' process CPU, loaded phase", own_loaded, "s"),
        Row("hostile: attackers' process CPU, loaded phase", attackers_loaded, "s"),
        # Where the host's CPU went: the jobs (the jails the server reaped in the phase: a job
        # still running at its end, and a fork bomb's orphans, are not counted) and the whole
        # host (other sessions' work included), against what its CPUs had in the phase (which
        # lasts until its last normal job has finished).
        Row("hostile: reaped jobs' CPU, unloaded phase", jails_unloaded, "s"),
        Row("hostile: reaped jobs' CPU, loaded phase", jails_loaded, "s"),
        Row("hostile: host CPU busy, unloaded phase", host_unloaded, "s"),
        Row("hostile: host CPU in the unloaded phase", wall_unloaded * (os.cpu_count() or 1), "s"),
        Row("hostile: host CPU busy, loaded phase", host_loaded, "s"),
        Row("hostile: host CPU in the loaded phase", wall_loaded * (os.cpu_count() or 1), "s"),
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
            # The hourly quota (20 submits) would refuse a normal user within its first minute,
            # so it is lifted; the concurrent limit (2) and the CPU quota (10 CPU-s a minute,
            # which counts the server's CPU for a client's uploads too) stay as a host has them:
            # a normal user here spends about 1.2 CPU-s a minute.
            "--rate-per-hour",
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
        if log := os.environ.get("HOSTILE_SERVER_LOG"):
            Path(log).write_text(server.output)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    print_table(run(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0))
