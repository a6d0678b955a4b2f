"""Where a jail's processes are in the cgroups, and which limits hold them (real nsjail, as root).

On cgroup v1 the jail is never moved between cgroups after nsjail starts it: it stays in the
cgroups nsjail was started in, whose limits the server set (256 processes for the jail, one core),
because a move takes the kernel's host-wide lock on cgroup migrations (an RCU grace period, 12 ms
of every job's start). These read where the job's processes are and what holds them.
"""

from pathlib import Path

import pytest

from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from support.jobclient import (
    FORK_BOMB,
    GENEROUS,
    HELD,
    log_of,
    release,
    run_job,
    submit,
    wait_finished,
)
from support.servers import wait_until


def _version() -> int:
    cgroups = Cgroups.detect()
    assert cgroups is not None, "no cgroup controllers: the sandbox tests need them"
    return cgroups.version


v1_only = pytest.mark.skipif(
    _version() != 1, reason="on cgroup v2 nsjail itself puts the jail in a child of its own"
)


@v1_only
def test_the_job_sees_only_the_root_of_its_own_cgroups(server):
    record = run_job(server.url, 'print(open("/proc/self/cgroup").read())')
    assert record["status"] == "completed", record
    lines = [line for line in log_of(server.url, record["job_id"]).splitlines() if ":" in line]
    assert lines
    # Every controller's path is its namespace's root: the jail was never moved below where
    # nsjail was started (nsjail's own `NSJAIL.<pid>` named its host pid, too).
    assert all(line.split(":", 2)[2] == "/" for line in lines), lines


def _cgroup_of(pid: int, controller: str, mount: Path) -> Path:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _number, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return mount / path.lstrip("/")
    raise AssertionError(f"process {pid} is in no {controller} cgroup")


@v1_only
def test_every_process_of_a_job_is_held_by_its_pids_and_cpu_limits(server, state_dir):
    cgroups = Cgroups.detect(Layout.for_state(state_dir / "s0").instance)
    assert cgroups is not None
    job_id = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, job_id), timeout=60)
    memory = cgroups.mounts["memory"] / cgroups.parent / job_id
    pids = [int(pid) for pid in (memory / "cgroup.procs").read_text().split()]
    assert len(pids) == 2, pids  # nsjail and the job's Python
    try:
        for pid in pids:
            pids_cgroup = _cgroup_of(pid, "pids", cgroups.mounts["pids"])
            # The jail's 256 processes, and nsjail beside them.
            assert (pids_cgroup / "pids.max").read_text().strip() == "257", pids_cgroup
            cpu = _cgroup_of(pid, "cpu", cgroups.mounts["cpu"])
            quota = int((cpu / "cpu.cfs_quota_us").read_text())
            assert quota == int((cpu / "cpu.cfs_period_us").read_text()), cpu  # one core
    finally:
        release(server.url, state_dir / "s0", job_id)
    assert wait_finished(server.url, job_id)["status"] == "completed"


@v1_only  # on v2 nsjail sets the limit, as before, and the job's kernel memory counts too
def test_a_job_still_runs_at_most_256_processes(server):
    # As test_sandbox.py's fork bomb: children that never end by themselves, and time enough.
    record = run_job(server.url, FORK_BOMB.format(tries=400), wait=240, timeout=180)
    log = log_of(server.url, record["job_id"])
    assert "fork refused after" in log, log[-500:]
    # The job's own Python and its 255 children: the jail's 256, as nsjail's limit had it.
    assert int(log.split("fork refused after ")[1].split()[0]) == 255, log[-500:]


def test_the_jobs_groups_weigh_as_many_processes_as_there_are_slots(start_server, state_dir):
    """The scheduler weighs a cgroup as one task against what is beside it: at the default
    weight every running job together got the CPU of one busy process of the server's."""
    start_server(*GENEROUS, "--concurrency", "3")
    cgroups = Cgroups.detect(Layout.for_state(state_dir / "s0").instance)
    assert cgroups is not None
    if cgroups.version == 2:
        root, name, weight = cgroups.mounts["unified"], "cpu.weight", 300
    else:
        root, name, weight = cgroups.mounts["cpu"], "cpu.shares", 3 * 1024
    assert int((root / cgroups.parent / name).read_text()) == weight
    assert int((root / "jobrunner" / name).read_text()) >= weight
