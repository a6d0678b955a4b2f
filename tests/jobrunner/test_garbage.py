"""Issues 22 and 23: requests leave no cyclic garbage behind (counts, not timings).

Garbage that only the cyclic collector can free piles up in the oldest generation when it lived
a few seconds (a held connection), and a full collection of tens of thousands of such objects
stalled the whole server under bench-hostile. Each test makes REQUESTS requests of one kind to
the real app on a real loopback server in this process (the fake runner, as test_contract.py),
with the collector disabled meanwhile, and counts what `gc.collect()` then finds unreachable.

The client is a plain blocking socket in a thread, which makes no cycles of its own, so the
count is the server's. Before the fixes every connection left 39 such objects (hypercorn's
connection, asyncio's transport) and a refused upload 89 more (its exception, held by the task
that ran the unpacking thread, whose traceback held the frame holding the task).
"""

import asyncio
import gc
import json
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import trustme

from servekit import Listener
from support.fakerunner import Served, serving, steps
from support.jobclient import tarball
from support.servers import wait_until_async

REQUESTS = 20
# Less than one object per request: before, each request left 39 (a connection) or more.
BOUND = REQUESTS - 1
BOUNDARY = "gcboundary"


def exchange(url: str, raw: bytes, tls: ssl.SSLContext | None = None) -> bytes:
    """Send `raw` on a new connection (over TLS with `tls`) and read the answer until the
    server closes it."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as plain:
        sock = tls.wrap_socket(plain, server_hostname=host) if tls else plain
        with sock:
            sock.sendall(raw)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            return answer


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode()


def submit(files: list[tuple[str, bytes]], manifest: dict, path: str = "/submit") -> bytes:
    body = b""
    for name, data in [("manifest", json.dumps(manifest).encode()), *files]:
        disposition = f'form-data; name="{name}"'
        if name != "manifest":
            disposition = f'form-data; name="files"; filename="{name}"'
        body += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        body += data + b"\r\n"
    body += f"--{BOUNDARY}--\r\n".encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def connections_open() -> int:
    """hypercorn's connection tasks still running in this loop: a connection's objects are
    released when its task ends, after the client saw the answer."""
    return sum(
        1
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "").endswith("._server_callback")
    )


async def garbage_of(served: Served, request: Callable[[], bytes], expect: bytes) -> int:
    """Objects only the cyclic collector could free, left by REQUESTS `request`s (each answered
    `expect`, a status line's start), after one more to warm up (first uses: imports, caches)."""

    async def one() -> None:
        answer = await asyncio.to_thread(request)
        assert answer.startswith(expect), answer[:300]
        assert await wait_until_async(lambda: connections_open() == 0, timeout=30)

    await one()
    gc.collect()
    gc.disable()
    try:
        gc.collect()
        for _ in range(REQUESTS):
            await one()
        return gc.collect()
    finally:
        gc.enable()


def run(scenario: Callable[[Served], Awaitable[None]], tmp_path: Path, **options) -> None:
    async def main() -> None:
        async with serving(tmp_path / "state", **options) as served:
            await scenario(served)

    asyncio.run(main())


def test_plain_requests_and_refusals_leave_no_cyclic_garbage(tmp_path):
    """Every connection, whatever it asked: an answer, a 404, a 413 refused from its headers,
    a 426 on the WebSocket route, an HTTP/2 preface answered 505."""

    async def scenario(served: Served) -> None:
        url = served.url
        too_large = b"POST /submit HTTP/1.1\r\nHost: t\r\nContent-Length: 999999999\r\n\r\n"
        kinds = [
            (get("/health"), b"HTTP/1.1 200"),
            (get("/status/nothing"), b"HTTP/1.1 404"),
            (too_large, b"HTTP/1.1 413"),
            (get("/logs/nothing/stream"), b"HTTP/1.1 426"),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"HTTP/1.1 505"),
        ]
        for raw, expect in kinds:
            left = await garbage_of(served, lambda raw=raw: exchange(url, raw), expect)
            assert left <= BOUND, f"{raw[:30]!r}: {left} objects of cyclic garbage"

    run(scenario, tmp_path)


def test_tls_connections_leave_no_cyclic_garbage(tmp_path):
    """Over HTTPS the connection's transport is asyncio's TLS layer over the socket transport:
    the socket transport's read callback (a bound method of itself) is reached through the TLS
    layer only while the connection is open, so it must be let go before that link is cut."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(certfile)
    cert.private_key_pem.write_to_path(keyfile)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    listener = Listener("127.0.0.1", 0, str(certfile), str(keyfile))

    async def scenario(served: Served) -> None:
        assert served.url.startswith("https://")
        for raw, expect in [
            (get("/health"), b"HTTP/1.1 200"),
            (get("/status/nothing"), b"HTTP/1.1 404"),
        ]:
            left = await garbage_of(
                served, lambda raw=raw: exchange(served.url, raw, client), expect
            )
            assert left <= BOUND, f"{raw[:30]!r}: {left} objects of cyclic garbage over TLS"

    run(scenario, tmp_path, listener=listener)


def test_refused_uploads_leave_no_cyclic_garbage(tmp_path):
    """Uploads refused while they are unpacked (in a thread): not gzip, a corrupt archive."""

    async def scenario(served: Served) -> None:
        manifest = {"entrypoint": "main.json", "interpreter": "python"}
        not_gzip = submit([("job.tar.gz", b"\x1f\x8bnot gzip")], manifest)
        corrupt = submit([("job.tar.gz", tarball({"main.json": "[]"})[:-30])], manifest)
        for raw in (not_gzip, corrupt):
            left = await garbage_of(
                served, lambda raw=raw: exchange(served.url, raw), b"HTTP/1.1 400"
            )
            assert left <= BOUND, f"{left} objects of cyclic garbage"

    run(scenario, tmp_path)


def test_accepted_uploads_leave_no_cyclic_garbage(tmp_path):
    async def scenario(served: Served) -> None:
        manifest = {"entrypoint": "main.json", "interpreter": "python"}
        raw = submit([("job.tar.gz", tarball({"main.json": steps({"out": "x"})}))], manifest)
        left = await garbage_of(served, lambda: exchange(served.url, raw), b"HTTP/1.1 200")
        assert left <= BOUND, f"{left} objects of cyclic garbage"

    run(scenario, tmp_path)


def test_long_polls_answered_when_the_job_ends_leave_no_cyclic_garbage(tmp_path):
    """`POST /submit?wait=60`, answered with the job's final record: the task that watched for
    the client leaving is cancelled as the answer goes out and ends in a later turn of the
    loop, awaited by nobody (its cancellation, traceback and frames, must not stay behind)."""

    async def scenario(served: Served) -> None:
        manifest = {"entrypoint": "main.json", "interpreter": "python"}
        job = tarball({"main.json": steps({"out": "x"})})
        raw = submit([("job.tar.gz", job)], manifest, "/submit?wait=60")

        def submit_and_wait() -> bytes:
            answer = exchange(served.url, raw)
            assert b'"status":"completed"' in answer, answer[:300]
            return answer

        left = await garbage_of(served, submit_and_wait, b"HTTP/1.1 200")
        assert left <= BOUND, f"{left} objects of cyclic garbage"

    run(scenario, tmp_path)


def test_clients_that_reset_a_long_poll_leave_no_cyclic_garbage(tmp_path):
    """A long poll (`?wait=`) on a running job whose client resets the connection: the server
    learns it from a failed read (ECONNRESET), which asyncio keeps in the connection's close
    waiter."""

    async def scenario(served: Served) -> None:
        manifest = {"entrypoint": "main.json", "interpreter": "python"}
        job = tarball({"main.json": steps({"out": "started\n"}, {"wait": "end"})})
        accepted = await asyncio.to_thread(
            exchange, served.url, submit([("j.tar.gz", job)], manifest)
        )
        job_id = json.loads(accepted.partition(b"\r\n\r\n")[2])["job_id"]
        assert await wait_until_async(lambda: served.service.jobs[job_id].state == "running", 30)
        # The headers are answered only when the job ends: the client resets before that.
        poll = f"GET /status/{job_id}?wait=60 HTTP/1.1\r\nHost: t\r\n\r\n".encode()

        def reset_poll() -> bytes:
            host, port = served.url.removeprefix("http://").rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                sock.sendall(poll)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return b"reset"

        left = await garbage_of(served, reset_poll, b"reset")
        assert left <= BOUND, f"{left} objects of cyclic garbage"

    run(scenario, tmp_path)


def test_downloads_whose_client_leaves_leave_no_cyclic_garbage(tmp_path):
    """A download of a large output whose client reads the status line and then closes the
    connection (a reset, as unread data is left): the server stops sending the file."""

    async def scenario(served: Served) -> None:
        manifest = {"entrypoint": "main.json", "interpreter": "python"}
        job = tarball({"main.json": steps({"file": "big.bin", "data": "x" * 4_000_000})})
        accepted = await asyncio.to_thread(
            exchange, served.url, submit([("j.tar.gz", job)], manifest)
        )
        job_id = json.loads(accepted.partition(b"\r\n\r\n")[2])["job_id"]
        assert await wait_until_async(lambda: served.service.jobs[job_id].finished, 30)
        download = f"GET /download/{job_id}/big.bin HTTP/1.1\r\nHost: t\r\n\r\n".encode()

        def leave_early() -> bytes:
            host, port = served.url.removeprefix("http://").rsplit(":", 1)
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(30)
                sock.connect((host, int(port)))
                sock.sendall(download)
                return sock.recv(12)

        left = await garbage_of(served, leave_early, b"HTTP/1.1 200")
        assert left <= BOUND, f"{left} objects of cyclic garbage"

    run(scenario, tmp_path)
