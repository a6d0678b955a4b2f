"""What one client's connections may cost a real server (issue 22): HTTP/2 is not offered,
downloads count against the client's stream limit, a reader that stops reading is dropped, and a
server short of open files still answers others (real `jobrunner serve`, real nsjail)."""

import asyncio
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import h2.config
import h2.connection
import httpx
import websockets

from jobrunner.client import Client
from support.jobclient import GENEROUS, JOBRUNNER, need_sandbox, run_job, submit
from support.servers import ServerProcess, wait_until

MiB = 2**20
BIG = "open('big.bin', 'wb').write(b'b' * (32 << 20))\n"  # more than any socket buffers hold


def rss(server: ServerProcess) -> int:
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) * 1024


def fds(server: ServerProcess) -> int:
    return len(list(Path(f"/proc/{server.proc.pid}/fd").iterdir()))


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def stalled_download(url: str, path: str, source: str = "127.0.0.1") -> tuple[socket.socket, bytes]:
    """A client at `source` that asks for `path` and reads only the first bytes of the answer
    (a 4 KiB receive buffer: the server soon has to wait for it)."""
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.bind((source, 0))
    conn.settimeout(30)
    conn.connect(address(url))
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return conn, conn.recv(12)


def from_address(source: str, timeout: float = 30) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=timeout)


def dropped_by_server(conn: socket.socket) -> bool:
    """Whether the server's end of `conn` is gone from the kernel's table (/proc/net/tcp). A
    connection the kernel gives up on sends the client nothing: the client learns of it only
    when it reads or writes again."""
    theirs, ours = conn.getpeername()[1], conn.getsockname()[1]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote = (int(field.split(":")[1], 16) for field in line.split()[1:3])
        if (local, remote) == (theirs, ours):
            return False
    return True


def test_http2_streams_that_never_read_do_not_grow_the_server(server):
    # hypercorn took h2 with prior knowledge on plain HTTP and buffered each stream's whole body
    # while the client's window stayed shut: 100 streams of a 10 MB download, 1 GB.
    record = run_job(server.url, "open('big.bin', 'wb').write(b'b' * (10 << 20))\n")
    job = record["job_id"]
    before = rss(server)
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    for n in range(30):
        headers = [
            (":method", "GET"),
            (":scheme", "http"),
            (":authority", "x"),
            (":path", f"/download/{job}/big.bin"),
        ]
        client.send_headers(2 * n + 1, headers, end_stream=True)
    received = b""
    with socket.create_connection(address(server.url), timeout=30) as conn:
        conn.sendall(client.data_to_send())  # and never a WINDOW_UPDATE
        conn.setblocking(False)
        deadline = time.monotonic() + 20

        def answered() -> bool:
            nonlocal received
            try:
                while chunk := conn.recv(1 << 16):
                    received += chunk
            except BlockingIOError:
                return time.monotonic() > deadline  # (or the old server is still buffering)
            except ConnectionError:
                pass  # closed with our frames unread
            return True  # the server closed the connection

        wait_until(answered, timeout=30, interval=0.1)
        grown = rss(server) - before
    assert grown < 64 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
    assert received.startswith(b"HTTP/1.1 505 HTTP Version Not Supported\r\n"), received[:80]
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_downloads_count_against_the_clients_stream_limit(start_server):
    server = start_server(*GENEROUS, "--rate-streams", "3", "--write-timeout", "600")
    job = run_job(server.url, BIG)["job_id"]
    path = f"/download/{job}/big.bin"
    held = [stalled_download(server.url, path) for _ in range(3)]
    assert [head for _, head in held] == [b"HTTP/1.1 200"] * 3
    try:
        refused = httpx.get(f"{server.url}{path}", timeout=30)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        body = refused.json()
        assert body["error"] == "Rate limit exceeded" and body["retry_after"] == 1
        assert body["reason"] == "Too many streams (logs, downloads and long polls): 3/3 open"
        # Another client is served meanwhile: its health check, its submit, its download.
        with from_address("127.0.0.2") as other:
            assert other.get(f"{server.url}/health").status_code == 200
            files = {"files": ("job.tar.gz", b"")}
            reply = other.post(
                f"{server.url}/submit", files=files, data={"manifest": '{"entrypoint": "x.py"}'}
            )
            assert reply.status_code == 400  # answered (the job is invalid), not refused
            whole = other.get(f"{server.url}{path}")
            assert whole.status_code == 200 and len(whole.content) == 32 * MiB
    finally:
        for conn, _ in held:
            conn.close()

    def served_again() -> bool:
        with httpx.stream("GET", f"{server.url}{path}", timeout=30) as reply:
            return reply.status_code == 200

    assert wait_until(served_again, timeout=20, interval=0.1)


def test_readers_that_stop_reading_are_dropped_after_the_write_timeout(start_server):
    # Nothing ever dropped a client that stopped reading: 508 such downloads from one address
    # held all 1,024 of a server's descriptors.
    server = start_server(*GENEROUS, "--write-timeout", "1")
    code = BIG + "import sys\nsys.stdout.write(('r' * 1023 + '\\n') * 8 * 1024)\n"
    job = run_job(server.url, code)["job_id"]
    idle = fds(server)
    readers = [
        stalled_download(server.url, f"/download/{job}/big.bin"),
        stalled_download(server.url, f"/logs/{job}"),
    ]
    assert [head for _, head in readers] == [b"HTTP/1.1 200"] * 2
    assert fds(server) > idle  # the connections and the file
    try:
        assert wait_until(
            lambda: all(dropped_by_server(conn) for conn, _ in readers), timeout=60, interval=0.2
        )
    finally:
        for conn, _ in readers:
            conn.close()
    assert wait_until(lambda: fds(server) <= idle, timeout=20)
    log = submit(server.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert log.status_code == 200
    assert "Traceback" not in server.output


async def live_log_answer(url: str, job: str) -> int:
    """The status a live-log handshake gets (101 when it is accepted)."""
    try:
        async with websockets.connect(f"{url.replace('http', 'ws', 1)}/logs/{job}/stream"):
            return 101
    except websockets.InvalidStatus as denied:
        return denied.response.status_code


def test_a_server_short_of_open_files_still_answers_others(start_server):
    # With 1,024 descriptors (never raised), 508 unread downloads took them all: another
    # client's submit got `500 ... Too many open files`, its health checks failed, and the accept
    # loop logged a traceback every second.
    server = start_server(*GENEROUS, "--rate-streams", "8", "--write-timeout", "600")
    job = run_job(server.url, BIG)["job_id"]
    limit = 160
    subprocess.run(["prlimit", f"--pid={server.proc.pid}", f"--nofile={limit}:{limit}"], check=True)
    path = f"/download/{job}/big.bin"
    held: list[socket.socket] = []
    answers: list[bytes] = []
    try:
        for n in range(limit // 2):
            conn, head = stalled_download(server.url, path, f"127.0.1.{1 + n // 8}")
            held.append(conn)
            answers.append(head)
            if head != b"HTTP/1.1 200":
                break
        assert answers[-1] == b"HTTP/1.1 503", answers
        assert fds(server) < limit  # a reserve is left
        refused = httpx.get(f"{server.url}{path}", timeout=30)
        assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
        assert "short of open files" in refused.json()["details"]
        assert asyncio.run(live_log_answer(server.url, job)) == 503
        # Everybody else's short requests are answered.
        with from_address("127.0.0.2", timeout=10) as other:
            for _ in range(20):
                assert other.get(f"{server.url}/health").status_code == 200
            assert other.get(f"{server.url}/status/{job}").status_code == 200
            files = {"files": ("job.tar.gz", b"")}
            reply = other.post(f"{server.url}/submit", files=files, data={"manifest": "{}"})
            assert reply.status_code == 503, reply.text  # not 500: it waits, like the streams
        # Idle connections take the rest of the table: the accept loop says so once, briefly,
        # however long it goes on (each is closed after hypercorn's 5 s keep-alive timeout).
        lines = len(server.lines)
        idle = [socket.create_connection(address(server.url)) for _ in range(120)]
        try:
            for conn in idle:
                conn.settimeout(60)
                assert conn.recv(1) == b""  # accepted (at last) and closed by the server
        finally:
            for conn in idle:
                conn.close()
        logged = server.lines[lines:]
        assert len(logged) <= 5, "".join(logged)
        assert 1 <= sum("accept() failed" in line for line in logged) <= 2, "".join(logged)
    finally:
        for conn in held:
            conn.close()
    assert wait_until(lambda: httpx.get(f"{server.url}{path}").status_code == 200, timeout=30)
    assert "Traceback" not in server.output


def test_the_soft_limit_of_open_files_is_raised_at_start(state_dir):
    need_sandbox()
    argv = ["prlimit", "--nofile=512:4096", JOBRUNNER, "serve", "--port", "0"]
    with ServerProcess([*argv, "--state-dir", str(state_dir / "s")]) as server:
        limits = Path(f"/proc/{server.proc.pid}/limits").read_text()
        assert [line.split()[3:5] for line in limits.splitlines() if "open files" in line] == [
            ["4096", "4096"]
        ]
        assert "open files: soft limit raised from 512 to 4096" in server.output


def test_an_output_named_with_a_newline_is_downloaded(server, tmp_path):
    # Listed and signed, then 404: Starlette's `path` convertor (`.*`) stops at a newline.
    name = "a\nb"
    record = run_job(server.url, f"open({name!r}, 'w').write('newline')\n")
    assert name in record["output_files"]
    job = record["job_id"]
    reply = httpx.get(f"{server.url}/download/{job}/{quote(name, safe='')}")
    assert reply.status_code == 200 and reply.text == "newline"
    assert reply.headers["content-disposition"].startswith("attachment;")

    async def with_the_library() -> Path:
        async with Client(server.url) as client:
            return await client.download(job, name, tmp_path)

    assert asyncio.run(with_the_library()).read_text() == "newline"
