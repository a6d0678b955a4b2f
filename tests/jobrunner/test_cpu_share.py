"""Long CPU-bound jobs give way to short ones: after 1 CPU-second a job's CPU weight drops to a
tenth (least attained service), read back from the job's own cgroup while it runs."""

from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from support.jobclient import HELD, release, submit, wait_finished
from support.servers import wait_until


def job_weight(state, job_id: str) -> int | None:
    """The job's CPU weight on cgroup v2's scale (100 = default), None while it has no cgroup."""
    cgroups = Cgroups.detect(Layout.for_state(state).instance)
    assert cgroups is not None, "no cgroup controllers: the sandbox tests need them"
    if cgroups.version == 2:
        path = cgroups.mounts["unified"] / cgroups.parent / job_id / "cpu.weight"
        scale = 1.0
    else:
        path = cgroups.mounts["cpu"] / cgroups.parent / job_id / "cpu.shares"
        scale = 100 / 1024
    try:
        return round(int(path.read_text()) * scale)
    except (OSError, ValueError):
        return None


def test_a_cpu_bound_job_is_demoted_and_still_completes(server, state_dir):
    hog = "import time\nend = time.time() + 6\nwhile time.time() < end:\n    pass\nprint('done')\n"
    job_id = submit(server.url, {"main.py": hog}, {"entrypoint": "main.py"}).json()["job_id"]
    seen: set[int] = set()

    def demoted() -> bool:
        weight = job_weight(state_dir / "s0", job_id)
        if weight is not None:
            seen.add(weight)
        return weight == 10

    assert wait_until(demoted, timeout=30), f"weights seen: {seen}"
    record = wait_finished(server.url, job_id)
    assert record["status"] == "completed"  # a lower share, never a kill
    assert record["execution_metadata"]["cpu_seconds"] >= 1.0


def test_a_short_job_keeps_the_default_share(server, state_dir):
    # Held (it waits, using no CPU) until its weight has been looked at, then it ends.
    manifest = {"entrypoint": "main.py", "timeout": 120}
    job_id = submit(server.url, {"main.py": HELD}, manifest).json()["job_id"]
    assert wait_until(lambda: job_weight(state_dir / "s0", job_id) is not None, timeout=30)
    assert job_weight(state_dir / "s0", job_id) == 100
    release(server.url, state_dir / "s0", job_id)
    assert wait_finished(server.url, job_id)["status"] == "completed"
