"""The client against hostile job output and servers newer than itself (issue 10, items 16, 18)."""

import asyncio
import http.server
import json
import os
import pty
import re
import subprocess
import termios
import threading
from typing import ClassVar

from jobrunner.client import Client
from jobrunner.jobs import new_job_id
from support.jobclient import JOBRUNNER, run_job

ESCAPE_NAME = "\x1b]0;pwned\x07\u202etxt.sh"  # sets the window title, then reverses the text
ODD_NAME = "odd name %41?#;.txt"  # must be percent-encoded in a URL path


def test_job_ids_never_start_with_a_dash():
    # 0.1: token_urlsafe gave one id in 64 starting with "-", which a command line takes for an
    # option. 5,000 ids would have held ~78 such ones.
    ids = [new_job_id() for _ in range(5000)]
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{23}", job_id) for job_id in ids)
    assert len(set(ids)) == len(ids)


def run(*args: str, server: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [JOBRUNNER, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "JOBRUNNER_SERVER": server},
        timeout=60,
        **kwargs,
    )


def test_output_names_are_url_encoded_and_never_reach_the_terminal_raw(server, tmp_path):
    code = (
        f"open({ESCAPE_NAME!r}, 'w').write('e')\nopen({ODD_NAME!r}, 'w').write('odd')\n"
        "print('hi\\x1b[2J\\x1b]52;c;QUJD\\x07there')\n"
    )
    record = run_job(server.url, code)
    assert record["status"] == "completed", record
    job = record["job_id"]

    listing = run("outputs", job, server=server.url)
    assert listing.returncode == 0
    assert "\x1b" not in listing.stdout and "\u202e" not in listing.stdout
    assert "\\x1b]0;pwned\\x07\\u202etxt.sh" in listing.stdout
    assert ODD_NAME in listing.stdout

    status = run("status", job, server=server.url)
    assert "\x1b" not in status.stdout and "\u202e" not in status.stdout
    assert json.loads(status.stdout)["output_files"].keys() == {ESCAPE_NAME, ODD_NAME}

    fetched = run("download", job, "--dir", str(tmp_path / "all"), server=server.url)
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "all" / ODD_NAME).read_text() == "odd"
    assert (tmp_path / "all" / ESCAPE_NAME).read_text() == "e"
    assert "\x1b" not in fetched.stderr and "\u202e" not in fetched.stderr

    async def library():
        async with Client(server.url) as client:
            return await client.download(job, ODD_NAME, tmp_path / "one")

    assert asyncio.run(library()).read_text() == "odd"

    # Piped, the log is the job's bytes; on a terminal its escapes are shown, never obeyed.
    piped = run("logs", job, server=server.url)
    assert piped.stdout == "hi\x1b[2J\x1b]52;c;QUJD\x07there\n"
    assert on_a_terminal("logs", job, server=server.url) == "hi\\x1b[2J\\x1b]52;c;QUJD\\x07there\n"
    raw = on_a_terminal("logs", "--raw", job, server=server.url)
    assert raw == "hi\x1b[2J\x1b]52;c;QUJD\x07there\n"


def on_a_terminal(*args: str, server: str) -> str:
    """What a command writes to its standard output when that is a terminal (a pty)."""
    leader, follower = pty.openpty()
    attrs = termios.tcgetattr(follower)
    attrs[1] &= ~termios.ONLCR  # keep "\n" as "\n" (no CR added by the pty)
    termios.tcsetattr(follower, termios.TCSANOW, attrs)
    process = subprocess.Popen(
        [JOBRUNNER, *args],
        stdout=follower,
        stderr=subprocess.PIPE,
        env={**os.environ, "JOBRUNNER_SERVER": server},
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert process.wait(30) == 0, process.stderr.read() if process.stderr else ""
    return output.decode()


def test_an_id_that_starts_with_a_dash_goes_after_double_dash(server):
    shown = run("status", "--", "-abc", server=server.url)
    assert shown.returncode == 1 and shown.stderr == "jobrunner: 404 Job not found: -abc\n"


class FutureServer(http.server.ThreadingHTTPServer):
    """A server of a later version: new states, new failure reasons, new fields."""

    RECORD: ClassVar[dict] = {
        "job_id": "Future1234567890abcdefgh",
        "status": "archived",
        "execution_metadata": {
            "cpu_seconds": 0.5,
            "memory_peak_bytes": 1,
            "exit_code": None,
            "environment": "default",
            "gpu_seconds": 3.0,
        },
        "job_hash": "00" * 32,
        "output_files": {},
        "worker_metadata": {"worker_id": "k", "signature": None, "region": "eu"},
        "position": None,
        "created_at": "2026-01-01T00:00:00.000Z",
        "started_at": None,
        "finished_at": None,
        "wall_seconds": 0.0,
        "failure": "quota_moved\x1b[31m",
        "priority": 3,
    }

    def __init__(self) -> None:
        body = json.dumps(self.RECORD).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(handler):
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def test_unknown_future_values_and_fields_are_tolerated():
    future = FutureServer()
    job = FutureServer.RECORD["job_id"]

    async def library():
        async with Client(future.url) as client:
            return await client.status(job)

    record = asyncio.run(library())
    assert record.status == "archived" and record.failure == "quota_moved\x1b[31m"
    shown = run("status", job, server=future.url)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout
    assert json.loads(shown.stdout)["failure"] == "quota_moved\x1b[31m"
    future.shutdown()
