"""Hostile jobs and clients against a real server with the real nsjail sandbox (issue 10)."""

import os
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from support.jobclient import (
    GENEROUS,
    HELD,
    JOBRUNNER,
    collect,
    log_of,
    need_sandbox,
    release,
    run_job,
    submit,
    wait_finished,
)
from support.servers import ServerProcess, wait_until


def server_fds(server: ServerProcess) -> int:
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def server_rss(server: ServerProcess) -> int:
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_non_utf8_output_names_never_stop_the_service(server):
    code = (
        "import os\nos.makedirs('out', exist_ok=True)\n"
        "open(b'out/\\xff.txt', 'wb').write(b'x')\nopen('out/ok.txt', 'w').write('ok')\n"
    )
    for _ in range(3):  # two such jobs stopped every runner loop before
        record = run_job(server.url, code)
        assert record["status"] == "completed", log_of(server.url, record["job_id"])
        assert list(record["output_files"]) == ["out/ok.txt"]
        assert httpx.get(f"{server.url}/outputs/{record['job_id']}").status_code == 200
        log = log_of(server.url, record["job_id"])
        assert "[jobrunner] output out/\\xff.txt not listed: its name is not valid UTF-8" in log
    assert run_job(server.url, "print('still running jobs')")["status"] == "completed"


def test_copy_out_failure_never_shows_a_host_path(server, state_dir):
    code = (
        "import os\nfor level in range(25):\n"
        "    name = f'{level:03d}' + 'd' * 197\n    os.mkdir(name)\n    os.chdir(name)\n"
        "open('leaf.txt', 'w').write('deep')\n"
    )
    record = run_job(server.url, code)
    log = log_of(server.url, record["job_id"])
    assert record["status"] == "completed", log
    assert "not listed: not read (File name too long)" in log
    assert str(state_dir) not in log and "/jobs/" not in log


def test_nul_in_args_is_refused_before_anything_and_leaks_no_fd(server):
    run_job(server.url, "print(1)")  # warm up (and let its files close)
    before = server_fds(server)
    for index in range(20):
        manifest = {"entrypoint": "main.py", "args": ["x\u0000y"]}
        if index % 2:
            manifest = {"entrypoint": "main.py", "env": {"A": "x\u0000y"}}
        response = submit(server.url, {"main.py": "print(1)"}, manifest)
        assert response.status_code == 400 and response.json()["error"] == "Invalid manifest"
        assert "NUL character not allowed" in response.json()["details"]
    # Each submit was its own connection, which the server closes as it notices: wait for that.
    assert wait_until(lambda: server_fds(server) <= before, timeout=20), (
        server_fds(server),
        before,
    )


def test_interpreter_aliases_run_for_real(server):
    for interpreter, entry, code, said in (
        ("python3", "main.py", "print('from python3')", "from python3\n"),
        ("py", "main.py", "print('from py')", "from py\n"),
        ("sh", "run.sh", "echo from sh", "from sh\n"),
    ):
        response = submit(
            server.url, {entry: code}, {"entrypoint": entry, "interpreter": interpreter}
        )
        assert response.status_code == 200, response.text
        record = wait_finished(server.url, response.json()["job_id"])
        assert record["status"] == "completed"
        assert log_of(server.url, record["job_id"]) == said


def handshake(url: str, job_id: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(
        (
            f"GET /logs/{job_id}/stream HTTP/1.1\r\nHost: {host}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    return sock


@pytest.mark.timeout(180)
def test_followers_that_do_not_read_cost_bounded_memory(state_dir):
    need_sandbox()
    with ServerProcess(
        [JOBRUNNER, "serve", "--port", "0", "--state-dir", str(state_dir / "f"), *GENEROUS],
        env={"JOBRUNNER_FOLLOWER_STALL": "2"},
    ) as server:
        code = (
            "import sys\nline = 'q' * 1023 + '\\n'\n"
            "for _ in range(10 * 1024):\n    sys.stdout.write(line)\n"
        )
        record = run_job(server.url, code)
        assert record["status"] == "completed"
        httpx.get(f"{server.url}/logs/{record['job_id']}")  # warm up the plain log path
        before = server_rss(server)
        sockets = [handshake(server.url, record["job_id"]) for _ in range(8)]
        peak = before

        # Wait until the server has given up on every one of them (it logs each).
        def all_closed() -> bool:
            nonlocal peak
            peak = max(peak, server_rss(server))
            return server.output.count("closed 1013 (reader too slow)") == 8

        assert wait_until(all_closed, timeout=60, interval=0.05)
        for sock in sockets:
            sock.close()
        # Eight whole 10 MiB backlogs held in memory would be 80 MB and more.
        assert peak - before < 40 * 2**20, (before, peak)
        plain = [httpx.get(f"{server.url}/logs/{record['job_id']}") for _ in range(4)]
        assert all(len(reply.content) == 10 * 2**20 for reply in plain)


def test_shutdown_answers_503_while_running_jobs_finish(start_server, state_dir):
    server = start_server()
    job = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py", "timeout": 120}).json()
    assert wait_until(
        lambda: httpx.get(f"{server.url}/status/{job['job_id']}").json()["status"] == "running"
    )
    server.terminate()
    assert wait_until(
        lambda: httpx.get(f"{server.url}/stats").json()["your_quota"]["can_submit"] is False
    )
    refused = submit(server.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "30"
    assert refused.json()["error"] == "Service unavailable"
    # The running job stays readable until it ends, then the server exits.
    assert httpx.get(f"{server.url}/status/{job['job_id']}").json()["status"] == "running"
    release(server.url, state_dir / "s0", job["job_id"])
    collect(server.url, job["job_id"])  # record read, outputs downloaded: it may go
    assert server.wait(30) == 0
    assert f"job {job['job_id']} completed" in server.output
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health", timeout=2)


def test_status_lines_have_reason_phrases_on_a_real_server(server):
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            f"GET /status/nope HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        )
        head = sock.recv(64)
    assert head.startswith(b"HTTP/1.1 404 Not Found\r\n")


def test_env_list_runs_without_a_server(tmp_path):
    result = subprocess.run(
        [JOBRUNNER, "env", "list", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "JOBRUNNER_SERVER": "http://127.0.0.1:9"},
    )
    assert result.returncode == 0
    assert result.stdout.startswith("Environment templates of this installation")
