"""Log readers (plain `GET /logs` and the WebSocket) that leave, stall or come in numbers: the
real app on a loopback server in this process, with the fake runner (see test_contract.py).

The server runs in the test's own process, so its memory is this process's: `/proc/self`."""

import asyncio
import json
import logging
import socket
from pathlib import Path

import httpx
import pytest
import websockets
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.client import Client, JobrunnerError
from jobrunner.jobs import LOG_SLACK, NOTE_MAX, Log
from support.fakerunner import Served, serving, steps
from support.jobclient import tarball
from support.servers import wait_until_async

LINE = "x" * 1023 + "\n"
MiB = 2**20
SEND_FAILED = "socket.send() raised exception."


def memory(field: str) -> int:
    """VmRSS or VmHWM (the peak since `reset_peak`) of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


def reset_peak() -> int:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
    return memory("VmRSS")


def run(scenario, tmp_path: Path, **options) -> None:
    async def main() -> None:
        async with serving(tmp_path / "state", **options) as served:
            await scenario(served)

    asyncio.run(main())


async def start(served: Served, job: str) -> str:
    async with httpx.AsyncClient() as client:
        reply = await client.post(
            f"{served.url}/submit",
            files={"files": ("job.tar.gz", tarball({"main.json": job}))},
            data={"manifest": json.dumps({"entrypoint": "main.json", "interpreter": "python"})},
        )
    assert reply.status_code == 200, reply.text
    return reply.json()["job_id"]


async def stalled_reader(served: Served, request: str, source: str) -> tuple[socket.socket, bytes]:
    """A client at `source` that sends `request` and reads only the first bytes of the answer
    (a 4 KiB receive buffer, so the server soon has to wait for it)."""
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((source, 0))
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (host, int(port)))
    await loop.sock_sendall(sock, request.replace("HOST", host).encode())
    head = await asyncio.wait_for(loop.sock_recv(sock, 12), 20)
    return sock, head


def plain(path: str) -> str:
    return f"GET {path} HTTP/1.1\r\nHost: HOST\r\n\r\n"


def upgrade(path: str) -> str:
    return (
        f"GET {path} HTTP/1.1\r\nHost: HOST\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )


def sources(count: int, per_source: int = 4) -> list[str]:
    """Client addresses for `count` readers, a few per address (under any per-client cap)."""
    return [f"127.0.0.{2 + n // per_source}" for n in range(count)]


def send_failures(caplog: pytest.LogCaptureFixture) -> int:
    return sum(SEND_FAILED in record.getMessage() for record in caplog.records)


def test_plain_log_readers_that_leave_stop_costing_at_once(tmp_path, caplog):
    """0.2 kept producing a log for clients that had closed: hypercorn's send to a closed
    connection returns at once, so the body ran to its end, re-raising one stored error per
    chunk (whose growing traceback held the chunks) and logging each write."""
    caplog.set_level(logging.WARNING, logger="asyncio")
    count = 100

    async def scenario(served: Served) -> None:
        job_id = await start(served, steps({"out": LINE * 10 * 1024}))  # 10 MiB, the cap
        assert await wait_until_async(lambda: served.service.jobs[job_id].finished, 30)
        before = reset_peak()
        readers = [
            await stalled_reader(served, plain(f"/logs/{job_id}"), source)
            for source in sources(count)
        ]
        assert all(head.startswith(b"HTTP/1.1 200") for _, head in readers)
        for sock, _ in readers:
            sock.close()  # with unread data: the server's side is reset
        # A whole read by another client takes the server's loop many turns: by its end the
        # readers that left have been noticed.
        async with httpx.AsyncClient() as client:
            whole = await client.get(f"{served.url}/logs/{job_id}")
        assert len(whole.content) == 10 * MiB
        grown = memory("VmHWM") - before
        assert grown < 64 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
        assert send_failures(caplog) == 0
        limiter = served.service.limiter
        assert await wait_until_async(
            lambda: all(limiter.open_streams(ip) == 0 for ip in set(sources(count))), 10
        )

    run(scenario, tmp_path)


def test_followers_that_leave_mid_backlog_are_dropped_at_once(tmp_path, caplog):
    """0.2 never read from a follower's WebSocket, so it did not learn that the client had gone:
    it went on through the backlog and then followed the live log until the job ended."""
    caplog.set_level(logging.WARNING, logger="asyncio")
    count = 20

    async def scenario(served: Served) -> None:
        job_id = await start(served, steps({"out": LINE * 8 * 1024}, {"wait": "g"}))
        job = served.service.jobs[job_id]
        assert await wait_until_async(lambda: len(job.log.data) >= 8 * MiB, 30)
        followers = [
            await stalled_reader(served, upgrade(f"/logs/{job_id}/stream"), source)
            for source in sources(count)
        ]
        assert all(head.startswith(b"HTTP/1.1 101") for _, head in followers)
        assert await wait_until_async(lambda: len(job.log.followers) == count, 10)
        for sock, _ in followers:
            sock.close()
        assert await wait_until_async(lambda: not job.log.followers, 5), len(job.log.followers)
        assert job.state == "running"
        assert send_failures(caplog) == 0
        served.runner.open("g")

    run(scenario, tmp_path, follower_stall=60)


def test_log_streams_per_client_are_capped(tmp_path):
    async def scenario(served: Served) -> None:
        job_id = await start(served, steps({"out": LINE * 8 * 1024}, {"wait": "g"}))
        job = served.service.jobs[job_id]
        assert await wait_until_async(lambda: len(job.log.data) >= 8 * MiB, 30)
        held = [
            await stalled_reader(served, plain(f"/logs/{job_id}"), "127.0.0.1"),
            await stalled_reader(served, upgrade(f"/logs/{job_id}/stream"), "127.0.0.1"),
        ]
        assert [head[:12] for _, head in held] == [b"HTTP/1.1 200", b"HTTP/1.1 101"]
        async with httpx.AsyncClient() as client:
            refused = await client.get(f"{served.url}/logs/{job_id}")
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        body = refused.json()
        assert body["error"] == "Rate limit exceeded" and body["retry_after"] == 1
        assert body["reason"] == "Too many streams (logs, downloads and long polls): 2/2 open"
        with pytest.raises(websockets.InvalidStatus) as denied:
            await websockets.connect(f"{served.ws}/logs/{job_id}/stream", open_timeout=10)
        assert denied.value.response.status_code == 429
        assert json.loads(denied.value.response.body)["reason"] == body["reason"]
        async with Client(served.url) as library:
            with pytest.raises(JobrunnerError) as refused_follow:
                async for _ in library.follow(job_id):
                    pass
        assert (refused_follow.value.status, refused_follow.value.retry_after) == (429, 1)
        # Another client is served meanwhile.
        other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with httpx.AsyncClient(transport=other) as client:
            served_other = await client.get(f"{served.url}/logs/{job_id}")
        assert served_other.status_code == 200 and len(served_other.content) >= 8 * MiB
        for sock, _ in held:
            sock.close()
        limiter = served.service.limiter
        assert await wait_until_async(lambda: limiter.open_streams("127.0.0.1") == 0, 10)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{served.url}/logs/{job_id}")).status_code == 200
            info = (await client.get(f"{served.url}/")).json()
        assert "2 streams (logs, downloads) at once" in info["limits"]
        served.runner.open("g")

    run(scenario, tmp_path, rate_streams=2)


def test_a_follower_that_sends_a_big_message_is_closed_1009(tmp_path):
    """Followers only listen; what a client sends is read and dropped, and hypercorn holds a
    whole message before the app sees it (16 MiB by default): more than 64 KiB closes it."""

    async def scenario(served: Served) -> None:
        job_id = await start(served, steps({"out": "x\n"}, {"wait": "g"}))
        job = served.service.jobs[job_id]
        async with websockets.connect(f"{served.ws}/logs/{job_id}/stream") as ws:
            assert await ws.recv() == "x\n"
            await ws.send("y" * 1000)  # small ones are dropped
            await ws.send("z" * MiB)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        assert await wait_until_async(lambda: not job.log.followers, 10)
        served.runner.open("g")

    run(scenario, tmp_path)


# --- the cap holds for every line a job causes (issue 22, finding 5) ---------------------------

writes = st.lists(st.tuples(st.sampled_from(["append", "note"]), st.integers(0, 3000)), max_size=30)


@given(st.integers(1, 20_000), writes, st.integers(0, 5000))
def test_a_log_never_exceeds_its_cap_by_more_than_the_slack(cap, operations, last):
    log = Log(cap)
    for kind, size in operations:
        if kind == "append":
            log.append(b"o" * size)
        else:
            log.note("n" * size)
    log.last("r" * last)
    assert len(log.data) <= cap + LOG_SLACK
    assert log.data.count(b"log truncated") <= 1
    # Why the job stopped is always the last line, cut to NOTE_MAX bytes at most.
    final = log.data.rsplit(b"\n", 2)[-2]
    assert final.startswith(b"[jobrunner] r") or final == b"[jobrunner] "
    assert len(final) <= len(b"[jobrunner] ") + NOTE_MAX


def test_notes_stop_at_the_cap_and_keep_room_when_asked():
    log = Log(1000)
    assert log.note("a" * 500)
    assert not log.note("b" * 400, keep=200)  # would leave less than 200 bytes: not written
    assert not log.truncated and log.room == 1000 - len(log.data)
    assert log.note("c" * 300)
    assert not log.note("d" * 300)  # past the cap: the log is truncated there
    assert log.truncated and not log.note("e")
    log.last("the job exited with code 1")
    assert log.data.endswith(
        b"[jobrunner] log truncated at 0.000953674 MiB\n[jobrunner] the job exited with code 1\n"
    )
