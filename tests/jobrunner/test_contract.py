"""The HTTP contract in seconds and without root: the real app on a real loopback server in this
process, driven over real HTTP and WebSockets, with a fake runner instead of nsjail."""

import asyncio
import gc
import io
import json
import os
import socket
import tarfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import websockets

from jobrunner import uploads
from jobrunner.signing import verify_record
from support import hostiletar, wsframes
from support.fakerunner import Clock, Served, serving, steps
from support.jobclient import tarball
from support.servers import wait_until_async


def run(scenario: Callable[..., Awaitable[None]], tmp_path: Path, **options) -> None:
    async def main() -> None:
        async with serving(tmp_path / "state", **options) as served:
            await scenario(served)

    asyncio.run(main())


async def submit(
    client: httpx.AsyncClient,
    served: Served,
    job: str | dict,
    manifest: dict | None = None,
    **headers: str,
) -> httpx.Response:
    files = {"main.json": job} if isinstance(job, str) else job
    manifest = manifest or {"entrypoint": "main.json", "interpreter": "python"}
    return await client.post(
        f"{served.url}/submit",
        files={"files": ("job.tar.gz", tarball(files))},
        data={"manifest": json.dumps(manifest)},
        headers=headers,
    )


async def finished(client: httpx.AsyncClient, served: Served, job_id: str) -> dict:
    job = served.service.jobs[job_id]
    while not job.finished:  # woken by the log: it grows, or closes when the job ends
        await asyncio.wait_for(job.log.wait_beyond(len(job.log.data)), 30)
    return (await client.get(f"{served.url}/status/{job_id}")).json()


def test_a_job_through_every_endpoint(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            job = steps({"out": "hello\n"}, {"file": "out/a.txt", "data": "A"})
            accepted = (await submit(client, served, job)).json()
            record = await finished(client, served, accepted["job_id"])
            assert record["status"] == "completed" and set(record["output_files"]) == {"out/a.txt"}
            log = await client.get(f"{served.url}/logs/{accepted['job_id']}")
            assert log.text == "hello\n"
            download = await client.get(f"{served.url}/download/{accepted['job_id']}/out/a.txt")
            assert download.text == "A"

    run(scenario, tmp_path)


# --- 1. non-UTF-8 names and runner loops that survive ------------------------------------------


def test_outputs_with_non_utf8_names_never_stop_the_service(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            bad = steps(
                {"file_hex": b"out/\xff.txt".hex(), "data": "x"},
                {"file": "out/ok.txt", "data": "ok"},
            )
            for _ in range(3):  # two such jobs stopped every runner loop before
                accepted = (await submit(client, served, bad)).json()
                record = await finished(client, served, accepted["job_id"])
                assert record["status"] == "completed"
                assert list(record["output_files"]) == ["out/ok.txt"]
                listing = await client.get(f"{served.url}/outputs/{accepted['job_id']}")
                assert listing.status_code == 200
                log = (await client.get(f"{served.url}/logs/{accepted['job_id']}")).text
                assert "[jobrunner] output out/\\xff.txt not listed" in log
                # Kept on disk, byte for byte, under its own name.
                job_dir = served.service.jobs[accepted["job_id"]].directory
                assert os.path.exists(os.fsencode(job_dir / "outputs") + b"/out/\xff.txt")
            normal = (await submit(client, served, steps({"out": "fine\n"}))).json()
            assert (await finished(client, served, normal["job_id"]))["status"] == "completed"

    run(scenario, tmp_path, concurrency=2)


def test_a_runner_that_raises_fails_that_job_and_the_next_one_runs(tmp_path):
    secret = "/var/lib/jobrunner/jobs/host-only-path"

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            for _ in range(3):  # more jobs than runner loops
                accepted = (await submit(client, served, steps({"raise": secret}))).json()
                record = await finished(client, served, accepted["job_id"])
                assert record["status"] == "failed" and record["failure"] == "sandbox_error"
                assert record["worker_metadata"]["signature"]
                log = (await client.get(f"{served.url}/logs/{accepted['job_id']}")).text
                assert log.startswith("[jobrunner] the sandbox failed") and secret not in log
            normal = (await submit(client, served, steps({"out": "fine\n"}))).json()
            assert (await finished(client, served, normal["job_id"]))["status"] == "completed"

    run(scenario, tmp_path, concurrency=1)


def test_a_failing_finish_still_fails_the_job_and_keeps_the_loop(tmp_path):
    async def scenario(served: Served) -> None:
        service = served.service
        original = service._finish
        calls = {"n": 0}

        def finish_that_breaks_once(job, started, note):
            calls["n"] += 1
            if calls["n"] == 1:
                raise OSError("disk gone")
            original(job, started, note)

        service._finish = finish_that_breaks_once  # type: ignore[method-assign]
        async with httpx.AsyncClient() as client:
            first = (await submit(client, served, steps({"out": "x\n"}))).json()
            record = await finished(client, served, first["job_id"])
            assert record["failure"] == "sandbox_error"
            second = (await submit(client, served, steps({"out": "y\n"}))).json()
            assert (await finished(client, served, second["job_id"]))["status"] == "completed"

    run(scenario, tmp_path, concurrency=1)


def test_tar_member_with_a_non_utf8_name_is_a_400(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as archive:
        for name, data in ((b"main.json", b"[]"), (b"bad-\xff.txt", b"x")):
            info = tarfile.TarInfo(name.decode("utf-8", "surrogateescape"))
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"{served.url}/submit",
                files={"files": ("job.tar.gz", buffer.getvalue())},
                data={"manifest": json.dumps({"entrypoint": "main.json", "interpreter": "py"})},
            )
            assert response.status_code == 400, response.text
            assert response.json() == {
                "error": "Invalid manifest",
                "details": "bad-\\xff.txt: the name is not valid UTF-8",
            }

    run(scenario, tmp_path)


def test_failed_copy_out_names_only_the_jobs_relative_path(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            job = steps({"deep": 25, "data": "deep"}, {"file": "ok.txt", "data": "ok"})
            accepted = (await submit(client, served, job)).json()
            record = await finished(client, served, accepted["job_id"])
            assert record["status"] == "completed" and list(record["output_files"]) == ["ok.txt"]
            log = (await client.get(f"{served.url}/logs/{accepted['job_id']}")).text
            assert "not listed: not read (File name too long)" in log
            assert str(tmp_path) not in log and "/jobs/" not in log

    run(scenario, tmp_path)


# --- 2. followers and logs cost bounded memory -------------------------------------------------


def test_backlog_is_sent_in_bounded_chunks(tmp_path):
    async def scenario(served: Served) -> None:
        line = "z" * 1023 + "\n"
        async with httpx.AsyncClient() as client:
            accepted = (await submit(client, served, steps({"out": line * 1024}))).json()
            await finished(client, served, accepted["job_id"])
        url = f"{served.ws}/logs/{accepted['job_id']}/stream"
        async with websockets.connect(url, max_size=2**20) as ws:
            messages = [message async for message in ws]
        assert "".join(messages) == line * 1024  # type: ignore[arg-type]
        assert len(messages) >= 16 and max(len(m) for m in messages) <= 64 * 1024

    run(scenario, tmp_path)


def read_frames(sock: socket.socket) -> list[tuple[int, bytes]]:
    """The server's frames after its 101 answer, up to a close frame or the end."""
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101")
    return wsframes.read_frames(sock)


def test_a_follower_that_stops_reading_is_closed_1013(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            big = steps({"out": ("w" * 1023 + "\n") * 8 * 1024})  # 8 MiB, finished
            accepted = (await submit(client, served, big)).json()
            await finished(client, served, accepted["job_id"])
        job = served.service.jobs[accepted["job_id"]]
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (host, int(port)))
        await loop.sock_sendall(
            sock,
            (
                f"GET /logs/{job.id}/stream HTTP/1.1\r\nHost: {host}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode(),
        )
        assert await wait_until_async(lambda: bool(job.log.followers), 20)
        assert await wait_until_async(lambda: not job.log.followers, 20)  # the server gave up on it
        sock.setblocking(True)
        sock.settimeout(30)
        frames = await asyncio.to_thread(read_frames, sock)
        sock.close()
        opcode, payload = frames[-1]
        assert opcode == 8 and int.from_bytes(payload[:2], "big") == 1013
        assert sum(len(data) for op, data in frames if op == 1) < 4 * 2**20

    run(scenario, tmp_path, follower_stall=0.5)


def test_plain_log_of_non_utf8_bytes_streams_with_replacement(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            accepted = (await submit(client, served, steps({"out_hex": "ff" * 200_000}))).json()
            await finished(client, served, accepted["job_id"])
            async with client.stream("GET", f"{served.url}/logs/{accepted['job_id']}") as reply:
                assert reply.headers["content-type"] == "text/plain; charset=utf-8"
                assert "content-length" not in reply.headers  # streamed, not built whole
                sizes = [len(chunk) async for chunk in reply.aiter_raw()]
            assert sum(sizes) == 200_000 * 3  # U+FFFD per byte, as UTF-8

    run(scenario, tmp_path)


# --- 3. uploads: limits from the headers, bounded bodies ---------------------------------------


async def raw_request(served: Served, head: str, body: bytes = b"") -> tuple[socket.socket, bytes]:
    """Send a request head (and part of a body), then read the response's status line and
    headers without sending more."""
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode() + body)
    await writer.drain()
    response = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    length = int(
        next(
            (
                line.split(b":")[1]
                for line in response.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            b"0",
        )
    )
    response += await asyncio.wait_for(reader.readexactly(length), 20)
    writer.close()
    return writer.get_extra_info("socket"), response


def upload_head(served: Served, length: int) -> str:
    host = served.url.removeprefix("http://")
    return (
        f"POST /submit HTTP/1.1\r\nHost: {host}\r\nContent-Length: {length}\r\n"
        "Content-Type: multipart/form-data; boundary=B\r\n\r\n"
    )


def test_a_client_over_its_limit_is_refused_before_its_body(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            held = (await submit(client, served, steps({"wait": "g"}))).json()
            assert held["status"] == "queued"
        # 40 MiB announced, 100 bytes sent: the answer comes from the headers alone.
        _, response = await raw_request(served, upload_head(served, 40 * 2**20), b"--B\r\n" * 20)
        assert response.startswith(b"HTTP/1.1 429 Too Many Requests\r\n")
        assert b'"error":"Rate limit exceeded"' in response
        served.runner.open("g")

    run(scenario, tmp_path, rate_concurrent=1)


def test_a_refused_small_upload_is_answered_429_not_reset(tmp_path):
    """A client that reads only after it has sent its whole body (aiohttp, the jobrunner client)
    gets the 429, never a connection reset from the server closing under its writes."""
    from jobrunner.client import Client, JobrunnerError

    body = os.urandom(256 * 1024)  # incompressible: the upload is really this big

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            held = (await submit(client, served, steps({"wait": "g"}))).json()
            assert held["status"] == "queued"
        async with Client(served.url) as jobclient:
            for _ in range(10):
                with pytest.raises(JobrunnerError) as refused:
                    await jobclient.submit(
                        tarball=tarball({"main.json": steps(), "pad.bin": body}),
                        entrypoint="main.json",
                    )
                assert refused.value.status == 429
        served.runner.open("g")

    run(scenario, tmp_path, rate_concurrent=1)


def test_uploads_in_progress_count_against_the_concurrent_limit(tmp_path):
    async def scenario(served: Served) -> None:
        host, port = served.url.removeprefix("http://").rsplit(":", 1)
        slow = []
        for _ in range(2):  # two uploads that have sent their headers and are still sending
            _, writer = await asyncio.open_connection(host, int(port))
            writer.write(upload_head(served, 10 * 2**20).encode() + b"--B\r\n")
            await writer.drain()
            slow.append(writer)
        assert await wait_until_async(
            lambda: served.service.limiter.verdict("127.0.0.1").active == 2, 20
        )
        _, response = await raw_request(served, upload_head(served, 2**20), b"--B\r\n")
        assert response.startswith(b"HTTP/1.1 429 ")
        for writer in slow:
            writer.close()
        assert await wait_until_async(
            lambda: served.service.limiter.verdict("127.0.0.1").active == 0, 20
        )

    run(scenario, tmp_path, rate_concurrent=2)


def test_a_slow_upload_times_out_with_408(tmp_path):
    async def scenario(served: Served) -> None:
        _, response = await raw_request(served, upload_head(served, 2**20), b"--B\r\n")
        assert response.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert b'"error":"Request timeout"' in response
        assert served.service.limiter.verdict("127.0.0.1").active == 0  # its slot came back

    run(scenario, tmp_path, upload_timeout=0.5)


# --- 4. running jobs never starve the thread pool ----------------------------------------------


def test_submit_answers_while_every_slot_blocks_a_thread(tmp_path):
    slots = 12  # more than the default thread pool of a small machine (CPU count + 4)

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(slots):
                assert (await submit(client, served, steps({"block": "b"}))).status_code == 200
            assert await wait_until_async(lambda: served.service.running == slots, 20)
            answer = await asyncio.wait_for(submit(client, served, steps()), 10)
            assert answer.status_code == 200 and answer.json()["status"] == "queued"
            served.runner.open("b")

    run(scenario, tmp_path, concurrency=slots)


# --- 5. hostile tar uploads: tarfile's CVE-2024-6232, memory amplification, 500s --------------


@pytest.mark.timeout(30)  # tarfile on 3.11.7 spent minutes in the first attack, holding the GIL
@pytest.mark.parametrize("attack", sorted(hostiletar.ATTACKS))
def test_a_hostile_tar_is_a_400_and_health_answers_meanwhile(tmp_path, monkeypatch, attack):
    body = hostiletar.ATTACKS[attack]()
    started, health_answered = threading.Event(), threading.Event()
    extract = uploads.extract_tarball

    def extract_until_health_answered(raw, dest, budget) -> None:
        # The upload stays in progress until /health has answered: its answer must not wait
        # for the extraction, which on a thread must never stop the event loop.
        started.set()
        try:
            extract(raw, dest, budget)
        finally:
            health_answered.wait(20)

    monkeypatch.setattr(uploads, "extract_tarball", extract_until_health_answered)
    # Every upload to a thread: a little one is unpacked on the loop's thread, bounded (the next
    # test), and this one's extraction waits for /health.
    monkeypatch.setattr(uploads, "LITTLE_UPLOAD", 0)

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=20) as client:
            upload = asyncio.create_task(
                client.post(
                    f"{served.url}/submit",
                    files={"files": ("job.tar.gz", body)},
                    data={"manifest": json.dumps({"entrypoint": "main.py"})},
                )
            )
            assert await asyncio.to_thread(started.wait, 20)
            health = await client.get(f"{served.url}/health")
            health_answered.set()
            assert health.status_code == 200 and health.json()["status"] == "healthy"
            response = await upload
            assert response.status_code == 400
            assert response.json()["error"] == "Invalid manifest"
            assert hostiletar.DETAILS[attack] in response.json()["details"]
            assert os.listdir(served.service.jobs_dir) == []

    run(scenario, tmp_path)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("attack", sorted(hostiletar.ATTACKS))
def test_a_hostile_tar_is_refused_alike_whichever_thread_unpacks_it(tmp_path, attack):
    """As it comes: a little upload (most of these attacks are a few KiB) is unpacked on the event
    loop's thread under the little bounds, and one that goes beyond them (or a big one) anew in a
    thread. The answer is the same 400 either way, and nothing of the upload is left."""
    body = hostiletar.ATTACKS[attack]()

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=20) as client:
            response = await client.post(
                f"{served.url}/submit",
                files={"files": ("job.tar.gz", body)},
                data={"manifest": json.dumps({"entrypoint": "main.py"})},
            )
            assert response.status_code == 400
            assert response.json()["error"] == "Invalid manifest"
            assert hostiletar.DETAILS[attack] in response.json()["details"]
            health = await client.get(f"{served.url}/health")
            assert health.status_code == 200 and health.json()["status"] == "healthy"
            assert os.listdir(served.service.jobs_dir) == []
            staging = served.service.staging
            assert staging is None or os.listdir(staging) == []

    run(scenario, tmp_path)


def test_files_are_charged_whole_pages_at_submit(tmp_path):
    # The 9,000 x 8,193-byte case at a hundredth of the scale, with 1 MB of storage: 100 files
    # of 8,193 bytes are 0.82 MB of content but take 3 pages each, 1.23 MB of the job's tmpfs;
    # 81 of them and main.json's page are 999,424 bytes, and fit.
    def job(files: int) -> dict[str, str | bytes]:
        return {"main.json": steps(), **{f"f{i:03d}": bytes(8193) for i in range(files)}}

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=20) as client:
            accepted = await submit(client, served, job(81))
            assert accepted.status_code == 200, accepted.text
            refused = await submit(client, served, job(100))
            assert refused.status_code == 400
            assert refused.json() == {
                "error": "Invalid manifest",
                "details": "f081: the upload exceeds the 1 MB storage limit",
            }

    run(scenario, tmp_path, storage_mb=1)


# --- 7. NUL bytes -------------------------------------------------------------------------------


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize(
    ("manifest", "details"),
    [
        ({"args": ["a\u0000b"]}, "args[0]: NUL character not allowed"),
        ({"env": {"NAME": "x\u0000"}}, "env.NAME: NUL character not allowed"),
    ],
)
def test_nul_in_args_or_env_is_a_400_and_leaks_nothing(tmp_path, manifest, details):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            warm_up = await submit(client, served, steps())  # connections, threads
            await finished(client, served, warm_up.json()["job_id"])  # its files closed
            gc.collect()  # what earlier tests left unreferenced closes now, not while we count
            before = open_fds()
            for _ in range(20):
                response = await submit(
                    client,
                    served,
                    steps(),
                    {"entrypoint": "main.json", "interpreter": "python", **manifest},
                )
                assert response.status_code == 400
                assert response.json() == {"error": "Invalid manifest", "details": details}
            gc.collect()
            assert open_fds() == before
            assert len(os.listdir(served.service.jobs_dir)) == 1  # only the warm-up job

    run(scenario, tmp_path)


# --- 15. interpreter aliases --------------------------------------------------------------------


def test_interpreter_aliases_are_accepted_and_listed(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            listing = (await client.get(f"{served.url}/environments")).json()
            assert {"python", "python3", "py", "bash", "sh"} <= set(listing["interpreters"])
            for alias in ("python3", "py", "sh", "bash"):
                manifest = {"entrypoint": "main.json", "interpreter": alias}
                response = await submit(client, served, steps(), manifest)
                assert response.status_code == 200, response.text
                record = await finished(client, served, response.json()["job_id"])
                assert record["status"] == "completed"

    run(scenario, tmp_path)


# --- 18. small contract points ------------------------------------------------------------------


def test_nonzero_exit_log_ends_with_its_reason(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            accepted = (await submit(client, served, steps({"out": "bad"}, {"exit": 3}))).json()
            record = await finished(client, served, accepted["job_id"])
            assert record["failure"] == "nonzero_exit"
            log = (await client.get(f"{served.url}/logs/{accepted['job_id']}")).text
            assert log == "bad\n[jobrunner] the job exited with code 3\n"

    run(scenario, tmp_path)


def test_plain_get_on_the_stream_is_426(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{served.url}/logs/anything/stream")
            assert response.status_code == 426
            assert response.headers["upgrade"] == "websocket"
            assert response.json()["error"] == "Upgrade required"

    run(scenario, tmp_path)


def test_status_lines_carry_their_reason_phrase(tmp_path):
    async def scenario(served: Served) -> None:
        host = served.url.removeprefix("http://")
        for path, line in (
            ("/health", b"HTTP/1.1 200 OK\r\n"),
            ("/status/nope", b"HTTP/1.1 404 Not Found\r\n"),
            ("/logs/x/stream", b"HTTP/1.1 426 Upgrade Required\r\n"),
        ):
            _, response = await raw_request(
                served, f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )
            assert response.startswith(line), response[:40]

    run(scenario, tmp_path)


def test_503_while_shutting_down_and_running_jobs_stay_readable(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            running = (await submit(client, served, steps({"out": "x\n"}, {"wait": "g"}))).json()
            assert await wait_until_async(lambda: served.service.running == 1, 20)
            served.stop.set()  # as SIGTERM does
            assert await wait_until_async(lambda: not served.service.accepting, 20)
            refused = await submit(client, served, steps())
            assert refused.status_code == 503 and refused.headers["retry-after"] == "30"
            assert refused.json() == {
                "error": "Service unavailable",
                "details": "the server is shutting down",
            }
            stats = (await client.get(f"{served.url}/stats")).json()
            assert stats["your_quota"]["can_submit"] is False
            status = (await client.get(f"{served.url}/status/{running['job_id']}")).json()
            assert status["status"] == "running"
            served.runner.open("g")

    run(scenario, tmp_path, shutdown_grace=30)


def test_a_drain_runs_the_jobs_already_queued_and_stops_those_left_when_its_grace_ends(tmp_path):
    # Queued jobs used to be dropped at SIGTERM: their records said `queued` until the server
    # exited, and a pool in front then called them `worker_lost`. Now every job accepted ends
    # with a signed final record: run within the grace, or cancelled when it is over.
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            first = (await submit(client, served, steps({"wait": "g"}))).json()["job_id"]
            assert await wait_until_async(lambda: served.service.running == 1, 20)
            queued = (await submit(client, served, steps({"out": "ran\n"}))).json()["job_id"]
            stuck = (await submit(client, served, steps({"wait": "never"}))).json()["job_id"]
            served.stop.set()  # as SIGTERM does
            assert await wait_until_async(lambda: not served.service.accepting, 20)
            health = await client.get(f"{served.url}/health")
            assert (health.status_code, health.json()["status"]) == (503, "draining")
            served.runner.open("g")
            jobs = served.service.jobs
            assert await wait_until_async(lambda: jobs[stuck].finished, 60)
        assert jobs[first].state == jobs[queued].state == "completed"
        assert bytes(jobs[queued].log.data) == b"ran\n"
        record = served.service.status(stuck)
        assert (record.status, record.failure) == ("failed", "cancelled")
        assert verify_record(record, served.service.key.worker_id, job_id=stuck)  # signed
        assert bytes(jobs[stuck].log.data).endswith(
            b"[jobrunner] the job was cancelled: the server shut down and its grace of 1 s was "
            b"over\n"
        )

    run(scenario, tmp_path, concurrency=1, shutdown_grace=1)


# --- the service raises domain errors; the edge maps them ---------------------------------------


def test_service_raises_domain_errors(tmp_path):
    from jobrunner import errors

    async def scenario(served: Served) -> None:
        with pytest.raises(errors.JobNotFound):
            served.service.status("missing")
        with pytest.raises(errors.InvalidManifest):
            await served.service.submit("10.0.0.1", "{}", [])

    run(scenario, tmp_path)


# --- 8. uploads in parts: one budget per upload, a cap on parts, the deadline covers unpacking ---


def multipart(fields: list[tuple[str, str | None, bytes]]) -> bytes:
    """A multipart/form-data body with boundary B: (name, file name or None, content) each."""
    body = b""
    for name, filename, content in fields:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--B\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"
    return body


def test_a_tarball_and_plain_files_up_to_the_cap_are_one_job(tmp_path):
    async def scenario(served: Served) -> None:
        plain = [("files", (f"data{n}.txt", b"%d" % n)) for n in range(uploads.MAX_FILE_PARTS - 1)]
        async with httpx.AsyncClient(timeout=20) as client:
            answer = await client.post(
                f"{served.url}/submit",
                files=[("files", ("job.tar.gz", tarball({"main.json": steps()}))), *plain],
                data={"manifest": json.dumps({"entrypoint": "main.json", "interpreter": "python"})},
            )
            assert answer.status_code == 200, answer.text
            job = served.service.jobs[answer.json()["job_id"]]
            assert sorted(f.path for f in job.inputs) == sorted(
                ["main.json", *(name for _, (name, _) in plain)]
            )

    run(scenario, tmp_path)


def test_more_file_parts_than_the_cap_are_a_400_naming_it(tmp_path):
    cap = uploads.MAX_FILE_PARTS
    details = f"too many file parts: at most {cap} per upload (send more files in one tarball)"
    manifest = (
        "manifest",
        None,
        json.dumps({"entrypoint": "f0", "interpreter": "python"}).encode(),
    )

    async def scenario(served: Served) -> None:
        # One part over: all of them read (a manifest may come as a file part), then refused.
        over = multipart([manifest, *(("files", f"f{n}", b"1") for n in range(cap + 1))])
        _, response = await raw_request(
            served, upload_head(served, len(over) + 6), over + b"--B--\r\n"
        )
        assert response.startswith(b"HTTP/1.1 400 ")
        assert json.loads(response.partition(b"\r\n\r\n")[2]) == {
            "error": "Invalid manifest",
            "details": details,
        }
        # Far more parts, announced in a 10 MiB body: refused at the first part past the cap,
        # without waiting for the rest of the body.
        many = multipart([manifest, *(("files", f"f{n}", b"1") for n in range(cap + 2))])
        _, response = await raw_request(served, upload_head(served, 10 * 2**20), many)
        assert response.startswith(b"HTTP/1.1 400 ")
        assert json.loads(response.partition(b"\r\n\r\n")[2])["details"] == details
        assert os.listdir(served.service.jobs_dir) == []
        assert served.service.limiter.verdict("127.0.0.1").active == 0

    run(scenario, tmp_path)


def test_extended_headers_are_bounded_per_upload_not_per_part(tmp_path):
    # With 10 entries allowed, an upload's extended headers may cost 10 x 2 KiB + 64 KiB: one
    # global header of 1,000 records (costing 64,512) fits, two do not, in one part or in two.
    comment = hostiletar.pax_globals(headers=1, records=1000)

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=20) as client:
            for archives in (1, 2):
                answer = await client.post(
                    f"{served.url}/submit",
                    files=[
                        ("files", ("main.py", hostiletar.MAIN)),
                        *(("files", (f"c{n}.tar.gz", comment)) for n in range(archives)),
                    ],
                    data={"manifest": json.dumps({"entrypoint": "main.py"})},
                )
                if archives == 1:
                    assert answer.status_code == 200, answer.text
                    continue
                assert answer.status_code == 400
                assert answer.json() == {
                    "error": "Invalid manifest",
                    "details": "g: extended headers exceed 86016 bytes in total",
                }

    run(scenario, tmp_path, max_entries=10)


def test_unpacking_past_the_upload_timeout_is_a_408_and_leaves_nothing(tmp_path, monkeypatch):
    # The body arrives at once; its unpacking starts only when the upload's time is up (as a
    # CPU-heavy archive would still be running then): it must stop there, not run on.
    timeout = 1.0
    unpacking, finished = threading.Event(), threading.Event()
    extract = uploads.extract_tarball

    def extract_after_the_deadline(raw, dest, budget) -> None:
        unpacking.set()
        begun = time.monotonic()  # after the request came, so the deadline is before this + timeout
        try:
            while time.monotonic() <= begun + timeout:
                time.sleep(0.01)
            extract(raw, dest, budget)
        finally:
            finished.set()

    monkeypatch.setattr(uploads, "extract_tarball", extract_after_the_deadline)

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=20) as client:
            response = await submit(client, served, steps())
            assert unpacking.is_set() and finished.is_set()
            assert response.status_code == 408, response.text
            assert response.json() == {
                "error": "Request timeout",
                "details": "the upload was not received and unpacked within 1 s",
            }
            assert os.listdir(served.service.jobs_dir) == []
            assert served.service.limiter.verdict("127.0.0.1").active == 0

    run(scenario, tmp_path, upload_timeout=timeout)


def test_a_cancelled_submit_waits_for_its_unpacking_thread(tmp_path, monkeypatch):
    # The client's slot bounds its unpacking threads, and the job dir is removed on the way
    # out: neither may happen while the thread still writes there.
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    extract = uploads.extract_tarball

    def held_extract(raw, dest, budget) -> None:
        started.set()
        try:
            release.wait(20)
            extract(raw, dest, budget)
        finally:
            ended.set()

    monkeypatch.setattr(uploads, "extract_tarball", held_extract)
    # In a thread, as a bigger upload is: a little one is unpacked on the event loop's thread,
    # where nothing can cancel it midway (and its work is bounded).
    monkeypatch.setattr(uploads, "LITTLE_UPLOAD", 0)

    async def scenario(served: Served) -> None:
        part = uploads.UploadPart("job.tar.gz", io.BytesIO(tarball({"main.json": steps()})))
        manifest = json.dumps({"entrypoint": "main.json", "interpreter": "python"})
        task = asyncio.create_task(served.service.submit("10.0.0.1", manifest, [part]))
        assert await asyncio.to_thread(started.wait, 20)
        task.cancel()
        asyncio.get_running_loop().call_later(0.2, release.set)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert ended.is_set()  # the thread had ended before the slot came back
        assert served.service.limiter.verdict("10.0.0.1").active == 0
        assert os.listdir(served.service.jobs_dir) == []

    try:
        run(scenario, tmp_path)
    finally:
        release.set()


# --- issue 23: the queue is fair between clients ------------------------------------------------

PROXIED = {"trusted_proxies": ["127.0.0.1"]}  # each client its own address (X-Forwarded-For)


async def submit_as(
    client: httpx.AsyncClient, served: Served, ip: str, job: str, timeout: int | None = None
) -> str:
    manifest = {"entrypoint": "main.json", "interpreter": "python"}
    if timeout is not None:
        manifest["timeout"] = timeout
    answer = await submit(client, served, job, manifest, **{"X-Forwarded-For": ip})
    assert answer.status_code == 200, answer.text
    return answer.json()["job_id"]


def test_a_short_job_is_not_stuck_behind_other_clients_long_ones(tmp_path):
    """Three clients' six long jobs and two slots: while a client with short jobs is about, the
    last free slot is kept for short jobs, so its next one (and a newcomer's with a short time
    limit) runs at once instead of after the long ones."""
    clock = Clock()

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            first = await submit_as(client, served, "10.1.0.1", steps({"out": "short\n"}))
            assert (await finished(client, served, first))["status"] == "completed"
            long_jobs = [
                await submit_as(client, served, f"10.2.0.{n}", steps({"wait": "long"}))
                for n in range(3)
                for _ in range(2)
            ]
            clock.advance(60)  # the running ones have held their slots a minute
            short = await submit_as(client, served, "10.1.0.1", steps({"out": "short\n"}))
            assert (await finished(client, served, short))["status"] == "completed"
            newcomer = await submit_as(client, served, "10.3.0.1", steps(), timeout=5)
            assert (await finished(client, served, newcomer))["status"] == "completed"
            assert not any(served.service.jobs[job].finished for job in long_jobs)
            served.runner.open("long")
            for job in long_jobs:
                assert (await finished(client, served, job))["status"] == "completed"

    run(scenario, tmp_path, concurrency=2, clock=clock, **PROXIED)


def test_a_client_whose_job_ran_long_waits_for_its_next_start(tmp_path):
    """One slot; a client whose job held it for 100 s submits again just before another
    client: the other client's job starts first, and the positions said so."""
    clock = Clock()

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            ran_long = await submit_as(client, served, "10.3.0.1", steps({"wait": "long"}))
            assert await wait_until_async(lambda: served.service.jobs[ran_long].state == "running")
            clock.advance(100)
            served.runner.open("long")
            await finished(client, served, ran_long)
            holder = await submit_as(client, served, "10.3.0.2", steps({"wait": "hold"}))
            assert await wait_until_async(lambda: served.service.jobs[holder].state == "running")
            again = await submit_as(client, served, "10.3.0.1", steps())
            other = await submit_as(client, served, "10.3.0.3", steps())
            positions = [
                (await client.get(f"{served.url}/status/{job}")).json()["position"]
                for job in (other, again)
            ]
            assert positions == [1, 2]
            served.runner.open("hold")
            for job in (holder, again, other):
                await finished(client, served, job)
            assert served.runner.started[-2:] == [other, again]

    run(scenario, tmp_path, concurrency=1, clock=clock, **PROXIED)


def test_a_full_queue_is_a_503_with_retry_after(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            held = (await submit(client, served, steps({"wait": "g"}))).json()["job_id"]
            assert await wait_until_async(lambda: served.service.jobs[held].state == "running")
            queued = [(await submit(client, served, steps())).json() for _ in range(2)]
            assert [job["position"] for job in queued] == [1, 2]
            refused = await submit(client, served, steps())
            assert refused.status_code == 503 and refused.headers["retry-after"] == "10"
            assert refused.json() == {
                "error": "Service unavailable",
                "details": "the queue is full (2 jobs); try again shortly",
            }
            served.runner.open("g")
            for job in queued:
                assert (await finished(client, served, job["job_id"]))["status"] == "completed"

    run(scenario, tmp_path, concurrency=1, max_queue=2)
