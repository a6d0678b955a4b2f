"""What comes and goes with every job (its work dir's mount point, the files covering its /proc
files, nsjail's log) lives on tmpfs mounts of the sandbox's own, never on the host's disk, and a
stopped server leaves none of them mounted (real nsjail, as root)."""

import os

from jobrunner.sandbox import Sandbox
from jobrunner.sandbox.layout import Layout
from support.jobclient import (
    HELD,
    log_of,
    mounted_at,
    need_sandbox,
    release,
    submit,
    wait_finished,
)
from support.servers import wait_until


def test_a_running_jobs_scratch_is_on_tmpfs_and_goes_with_it(server, state_dir):
    layout = Layout.for_state(state_dir / "s0")
    job_id = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, job_id), timeout=60)
    try:
        assert mounted_at(layout.work) == ["tmpfs"]
        assert mounted_at(layout.proc) == ["tmpfs"]
        assert mounted_at(layout.work / job_id) == ["tmpfs"]  # the job's own, on top
        assert (layout.proc / job_id / "meminfo").is_file()
        assert (layout.proc / job_id / "nsjail.log").is_file()
        assert not (state_dir / "s0" / "jobs" / job_id / "nsjail.log").exists()
    finally:
        release(server.url, state_dir / "s0", job_id)
    assert wait_finished(server.url, job_id)["status"] == "completed"
    # Published before its jail's teardown, which follows at once: the scratch goes just after.
    assert wait_until(
        lambda: not (layout.proc / job_id).exists() and not (layout.work / job_id).exists(),
        timeout=30,
    )


def test_a_stopped_server_leaves_no_scratch_mounted(start_server, state_dir):
    server = start_server()
    layout = Layout.for_state(state_dir / "s0")
    job_id = submit(server.url, {"main.py": "print('hi')\n"}, {"entrypoint": "main.py"}).json()
    assert wait_finished(server.url, job_id["job_id"])["status"] == "completed"
    server.stop()
    assert mounted_at(layout.work) == [] and mounted_at(layout.proc) == []


def test_a_start_after_a_crash_keeps_the_scratch_it_finds(state_dir):
    need_sandbox()
    state = state_dir / "in-process"
    state.mkdir(mode=0o711)
    crashed = Sandbox.find(state)  # never closed, as after a SIGKILL
    (crashed.layout.proc / "left-by-a-job").mkdir()
    restarted = Sandbox.find(state)
    try:
        for scratch in (restarted.layout.work, restarted.layout.proc):
            assert mounted_at(scratch) == ["tmpfs"], scratch  # one, not one more per start
        assert os.listdir(restarted.layout.proc) == []  # what the earlier run left is gone
    finally:
        restarted.close()
        crashed.job_ids.release()  # the ids it claimed: this process's, like the restart's
    assert mounted_at(restarted.layout.work) == [] and mounted_at(restarted.layout.proc) == []
