"""The real sandbox's staging tmpfs: queued uploads wait in RAM, leave nothing on the state dir's
disk, are taken by the jobs that run them, and an earlier run's are cleared at the next start."""

import os
import signal

import httpx

from jobrunner.sandbox.layout import Layout
from jobrunner.sandbox.workdir import STAGING_BYTES_PER_INODE
from support.jobclient import GENEROUS, HELD, log_of, mounted_at, release, submit, wait_finished
from support.servers import wait_until

READER = (
    "import sys\n"
    "data = sys.stdin.read()\n"
    "open('seen.txt', 'w').write(data.upper())\n"
    "print('read', len(data))\n"
)


def test_queued_uploads_wait_in_ram_and_reach_their_jobs(start_server, state_dir):
    server = start_server(*GENEROUS, "--concurrency", "1")
    state = state_dir / "s0"
    staging, jobs = Layout.for_state(state).staging, state / "jobs"
    assert mounted_at(staging) == ["tmpfs"]
    assert staging.stat().st_mode & 0o777 == 0o700  # the server's alone: no jail reads it
    # Its inodes are bounded by its size (each is kernel memory its size does not count).
    room = os.statvfs(staging)
    assert room.f_files == room.f_blocks * room.f_frsize // STAGING_BYTES_PER_INODE

    running = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()
    queued = submit(
        server.url,
        {"main.py": READER, "data/input.txt": "kept"},
        {"entrypoint": "main.py", "stdin": "fed to the job\n"},
    ).json()
    waiting = staging / queued["job_id"]
    assert (waiting / "inputs" / "data" / "input.txt").read_text() == "kept"
    assert (waiting / "stdin").read_text() == "fed to the job\n"
    assert not (jobs / queued["job_id"]).exists()

    release(server.url, state, running["job_id"])
    record = wait_finished(server.url, queued["job_id"])
    assert record["status"] == "completed", log_of(server.url, queued["job_id"])
    assert "read 15" in log_of(server.url, queued["job_id"])
    seen = httpx.get(f"{server.url}/download/{queued['job_id']}/seen.txt")
    assert seen.status_code == 200 and seen.text == "FED TO THE JOB\n"
    assert not waiting.exists()  # the job took its files: the RAM is free again
    assert wait_finished(server.url, running["job_id"])["status"] == "completed"
    # A job without outputs never needs a dir on the disk at all.
    hello = submit(server.url, {"main.py": "print('hi')"}, {"entrypoint": "main.py"}).json()
    assert wait_finished(server.url, hello["job_id"])["status"] == "completed"
    assert log_of(server.url, hello["job_id"]) == "hi\n"
    assert not (jobs / hello["job_id"]).exists()
    assert list(staging.iterdir()) == []


def test_a_restart_after_a_crash_clears_the_uploads_left_waiting(start_server, state_dir):
    state = state_dir / "crashed"
    first = start_server(*GENEROUS, "--concurrency", "1", state=state)
    staging = Layout.for_state(state).staging
    running = submit(first.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()
    assert wait_until(lambda: "held" in log_of(first.url, running["job_id"]), timeout=60)
    queued = submit(first.url, {"main.py": "print('never')"}, {"entrypoint": "main.py"}).json()
    assert (staging / queued["job_id"]).is_dir()

    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(30)
    assert (staging / queued["job_id"]).is_dir()  # still mounted, still there

    second = start_server(*GENEROUS, "--concurrency", "1", state=state)
    assert mounted_at(staging) == ["tmpfs"]  # a fresh tmpfs, not a second one on top
    assert list(staging.iterdir()) == []
    assert staging.stat().st_mode & 0o777 == 0o700  # still the server's alone
    job = submit(second.url, {"main.py": "print('after')"}, {"entrypoint": "main.py"}).json()
    assert wait_finished(second.url, job["job_id"])["status"] == "completed"


def test_a_big_staged_upload_is_freed_once_its_job_runs(start_server, state_dir):
    # More files than the set-up removes itself: they go beside the job, and are gone after.
    server = start_server(*GENEROUS, "--concurrency", "1")
    state = state_dir / "s0"
    staging = Layout.for_state(state).staging
    running = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()
    files = {f"data/{n:03d}.txt": str(n) for n in range(200)}
    code = "import os\nprint(len(os.listdir('data')))\n"
    queued = submit(server.url, {"main.py": code, **files}, {"entrypoint": "main.py"}).json()
    assert len(list((staging / queued["job_id"] / "inputs" / "data").iterdir())) == 200
    release(server.url, state, running["job_id"])
    assert wait_finished(server.url, queued["job_id"])["status"] == "completed"
    assert log_of(server.url, queued["job_id"]) == "200\n"
    assert wait_until(lambda: list(staging.iterdir()) == [], timeout=30)
