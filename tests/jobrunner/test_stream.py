"""The live log over a real WebSocket: framing, order, close codes, slow readers."""

import asyncio
import socket as socket_module

import pytest
import websockets

from support.jobclient import log_of, submit, wait_finished
from support.wsframes import read_frames

TICKS = "import time\nfor i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(0.2)\n"


def ws_url(http_url: str, job_id: str) -> str:
    return http_url.replace("http://", "ws://", 1) + f"/logs/{job_id}/stream"


async def collect(url: str, **options) -> tuple[list[str], int, str]:
    messages = []
    async with websockets.connect(url, **options) as socket:
        try:
            async for message in socket:
                messages.append(message)
        except websockets.ConnectionClosed:
            pass
        return messages, socket.close_code, socket.close_reason


def test_follows_a_running_job_in_order_and_closes_with_status(server):
    job = submit(server.url, {"main.py": TICKS}, {"entrypoint": "main.py"}).json()
    messages, code, reason = asyncio.run(collect(ws_url(server.url, job["job_id"])))
    assert "".join(messages) == "".join(f"tick {i}\n" for i in range(6))
    assert len(messages) >= 3  # delivered as produced, not in one piece at the end
    assert (code, reason) == (1000, "completed")
    assert "".join(messages) == log_of(server.url, job["job_id"])


def test_finished_job_sends_whole_log_then_closes(server):
    job = submit(
        server.url,
        {"main.py": "import sys\nprint('out')\nsys.exit(4)\n"},
        {"entrypoint": "main.py"},
    ).json()
    wait_finished(server.url, job["job_id"])
    messages, code, reason = asyncio.run(collect(ws_url(server.url, job["job_id"])))
    assert messages == ["out\n[jobrunner] the job exited with code 4\n"]
    assert (code, reason) == (1000, "failed")


def test_unknown_job_closes_4404(server):
    messages, code, reason = asyncio.run(collect(ws_url(server.url, "no-such-job")))
    assert messages == [] and (code, reason) == (4404, "Job not found")


def test_several_followers_see_the_same_log(server):
    job = submit(server.url, {"main.py": TICKS}, {"entrypoint": "main.py"}).json()
    url = ws_url(server.url, job["job_id"])

    async def both():
        return await asyncio.gather(collect(url), collect(url))

    first, second = asyncio.run(both())
    assert "".join(first[0]) == "".join(second[0]) == log_of(server.url, job["job_id"])


def test_multibyte_characters_split_across_chunks_arrive_intact(server):
    code = (
        "import sys, time\nsys.stdout.buffer.write('caf\\u00e9 '.encode()[:4]); "
        "sys.stdout.flush(); time.sleep(0.3)\n"
        "sys.stdout.buffer.write('caf\\u00e9 '.encode()[4:] + b'done\\n')\n"
    )
    job = submit(server.url, {"main.py": code}, {"entrypoint": "main.py"}).json()
    messages, _, _ = asyncio.run(collect(ws_url(server.url, job["job_id"])))
    assert "".join(messages) == "café done\n"


def test_log_is_capped_with_a_note_and_the_job_continues(server):
    code = (
        "import sys\nchunk = 'x' * 1023 + '\\n'\nfor _ in range(12 * 1024):\n"
        "    sys.stdout.write(chunk)\nsys.stdout.flush()\nopen('done.txt','w').write('ok')\n"
    )
    job = submit(server.url, {"main.py": code}, {"entrypoint": "main.py"}).json()
    record = wait_finished(server.url, job["job_id"])
    log = log_of(server.url, job["job_id"])
    assert record["status"] == "completed" and "done.txt" in record["output_files"]
    assert log.endswith("[jobrunner] log truncated at 10 MiB; the job continues\n")
    assert 10 * 2**20 <= len(log) < 10 * 2**20 + 200


@pytest.mark.timeout(120)
def test_reader_falling_far_behind_is_closed_1013(server):
    code = (
        "import sys, time\ntime.sleep(1)\nline = 'y' * 4095 + '\\n'\n"
        "for _ in range(2400):\n    sys.stdout.write(line)\nsys.stdout.flush()\n"
        "time.sleep(2)\n"
    )
    job = submit(server.url, {"main.py": code}, {"entrypoint": "main.py"}).json()
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    # A client that completes the handshake and then stops reading, with a tiny receive buffer.
    sock = socket_module.socket()
    sock.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(
        (
            f"GET /logs/{job['job_id']}/stream HTTP/1.1\r\nHost: {host}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:
        response += sock.recv(1)
    assert response.startswith(b"HTTP/1.1 101")
    # The job writes ~9.4 MiB meanwhile, and ends.
    assert wait_finished(server.url, job["job_id"])["status"] == "completed"
    sock.settimeout(30)
    frames = read_frames(sock)
    sock.close()
    opcode, payload = frames[-1]
    assert opcode == 8
    assert int.from_bytes(payload[:2], "big") == 1013 and payload[2:] == b"reader too slow"
    delivered = sum(len(data) for op, data in frames if op == 1)
    assert delivered < 9 * 2**20  # it was cut off, not fed the whole log
    assert wait_finished(server.url, job["job_id"])["status"] == "completed"
