"""Long CPU-bound jobs give way to short ones: after half a CPU-second a job's CPU weight drops to a
tenth (least attained service); a job busy in the kernel (a fork bomb, a syscall storm) is capped at
a tenth of a core while other jobs run, unless it is filling its memory. Both are read back from the
job's cgroups while it runs."""

from pathlib import Path

import pytest

from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from support.jobclient import GENEROUS, HELD, log_of, release, submit, wait_finished
from support.servers import wait_until

# Both stop by themselves once the test puts a file named `stop` into their work dir. The bomb's
# children wait instead of forking on: 256 copies of Python that all run would come near the memory
# limit on cgroup v2, which counts their kernel memory, and the test is not about memory.
FORK_BOMB = (
    "import os, time\nprint('started', flush=True)\nwhile not os.path.exists('stop'):\n"
    "    try:\n        child = os.fork()\n    except OSError:\n        continue\n"
    "    if child == 0:\n        while not os.path.exists('stop'):\n            time.sleep(0.05)\n"
    "        os._exit(0)\n"
)
SYSCALL_STORM = (  # reading /dev/zero: the kernel fills the buffer, the job does nothing else
    "import os\nprint('started', flush=True)\nbuffer = bytearray(8 * 2**20)\n"
    "with open('/dev/zero', 'rb', buffering=0) as zero:\n"
    "    while not os.path.exists('stop'):\n        zero.readinto(buffer)\n"
)

# Once the test puts `go` into its work dir: busy in the kernel (/dev/zero, page faults) while its
# memory grows by 2 MiB every 10 ms of wall time, however fast the machine, for 1.5 CPU-seconds of
# filling (so it is demoted on the way); then it writes `filled` and waits for `stop`. Not counted
# from its start: Python's own start took 3.2 CPU-seconds in the qemu VM of test-cgroup2 (TCG, host
# loaded), which left no time to fill, and the test's reads of the log there took longer than the
# filling.
MEMORY_FILLER = (
    "import os, time\nblocks, buffer = [], bytearray(4 * 2**20)\nprint('ready', flush=True)\n"
    "while not os.path.exists('go'):\n    time.sleep(0.01)\nstart = time.process_time()\n"
    "with open('/dev/zero', 'rb', buffering=0) as zero:\n"
    "    while time.process_time() - start < 1.5 and len(blocks) < 200:\n"
    "        blocks.append(bytearray(2 * 2**20))\n        tick = time.monotonic() + 0.01\n"
    "        while time.monotonic() < tick:\n            zero.readinto(buffer)\n"
    "open('filled', 'w').close()\nprint('filled', len(blocks), flush=True)\n"
    "while not os.path.exists('stop'):\n    pass\n"
)

# 64 processes that map 2 MiB, write it and unmap it, over and over, until `stop`: its memory goes
# up and down by megabytes every sample, its time is mostly the kernel's (page faults, zeroing,
# unmapping), and it never fills to its limit nor frees what it has for good.
MEMORY_CHURNER = (
    "import ctypes, mmap, os\nprint('started', flush=True)\n"
    "size = 2 * 2**20\n"
    "for _ in range(63):\n    if os.fork() == 0:\n        break\n"
    "while not os.path.exists('stop'):\n"
    "    block = mmap.mmap(-1, size)\n"
    "    ctypes.memset(ctypes.addressof(ctypes.c_char.from_buffer(block)), 1, size)\n"
    "    block.close()\n"
)


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


def cpu_cap(state: Path, job_id: str) -> float | None:
    """The most CPU the job's jail may use, in cores (v1: the quota on nsjail's child of the job's
    cgroup; v2: the job's own `cpu.max`); None while that cannot be read."""
    cgroups = Cgroups.detect(Layout.for_state(state).instance)
    assert cgroups is not None
    try:
        if cgroups.version == 2:
            quota, period = (
                (cgroups.mounts["unified"] / cgroups.parent / job_id / "cpu.max")
                .read_text()
                .split()
            )
            return float("inf") if quota == "max" else int(quota) / int(period)
        job_dir = cgroups.mounts["cpu"] / cgroups.parent / job_id
        (jail,) = [child for child in job_dir.iterdir() if child.is_dir()]
        quota = int((jail / "cpu.cfs_quota_us").read_text())
        return float("inf") if quota < 0 else quota / int((jail / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("code", [FORK_BOMB, SYSCALL_STORM], ids=["fork-bomb", "syscall-storm"])
def test_a_job_busy_in_the_kernel_is_capped_while_other_jobs_run(start_server, state_dir, code):
    server = start_server(*GENEROUS, "--concurrency", "2")
    state = state_dir / "s0"
    manifest = {"entrypoint": "main.py", "timeout": 300}  # a limit: the slow VM of test-cgroup2
    other = submit(server.url, {"main.py": HELD}, manifest).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, other), timeout=60)
    storm = submit(server.url, {"main.py": code}, manifest).json()["job_id"]
    seen: set[float | None] = set()

    def cap_is(cores: float) -> bool:
        seen.add(cap := cpu_cap(state, storm))
        return cap == cores

    assert wait_until(lambda: cap_is(0.1), timeout=60), f"caps seen: {seen}"
    release(server.url, state, other)  # now it runs alone: the cap goes, its one core stays
    assert wait_finished(server.url, other)["status"] == "completed"
    assert wait_until(lambda: cap_is(1.0), timeout=30), f"caps seen: {seen}"
    (Layout.for_state(state).work / storm / "stop").write_text("")
    record = wait_finished(server.url, storm)
    # Slowed while others ran, never killed.
    assert record["status"] == "completed", (record["failure"], log_of(server.url, storm)[-300:])


def test_a_job_filling_its_memory_is_not_capped(start_server, state_dir):
    # Capping it would only make it hold its memory and its slot for longer: the filling ends at
    # its memory limit anyway. Where starting Python is itself a long stretch in the kernel (the
    # slow VM of test-cgroup2) the filler may be capped before it fills: then filling must let it
    # off, and it must stay off until it has filled. At 7.8 MiB per CPU-second there (each page
    # fault slow), a capped filler grew by less than 1 MiB per sample and stayed capped.
    server = start_server(*GENEROUS, "--concurrency", "2")
    state = state_dir / "s0"
    manifest = {"entrypoint": "main.py", "timeout": 300, "memory_mb": 512}
    other = submit(server.url, {"main.py": HELD}, manifest).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, other), timeout=60)
    filler = submit(server.url, {"main.py": MEMORY_FILLER}, manifest).json()["job_id"]
    assert wait_until(lambda: "ready" in log_of(server.url, filler), timeout=240)
    work = Layout.for_state(state).work / filler
    caps: list[float | None] = []
    weights: set[int | None] = set()

    def filled() -> bool:
        caps.append(cpu_cap(state, filler))
        weights.add(job_weight(state, filler))
        return (work / "filled").exists()

    (work / "go").write_text("")
    assert wait_until(filled, timeout=240, interval=0.01)
    assert 10 in weights, f"never demoted, so the test proves nothing: weights {weights}"
    let_off = [n for n, cap in enumerate(caps) if cap not in (0.1, None)]
    assert let_off, f"capped throughout its filling: caps {caps}"
    assert 0.1 not in caps[let_off[0] :], f"capped while filling its memory: caps {caps}"
    assert wait_until(lambda: "filled" in log_of(server.url, filler), timeout=60)
    assert int(log_of(server.url, filler).split("filled")[1].split()[0]) > 0, "filled nothing"
    (work / "stop").write_text("")
    release(server.url, state, other)
    assert wait_finished(server.url, filler)["status"] == "completed"
    assert wait_finished(server.url, other)["status"] == "completed"


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


def test_a_job_churning_its_memory_in_the_kernel_is_capped_most_of_the_time(
    start_server, state_dir
):
    # Its memory moves by megabytes every sample, which used to pass for filling or freeing it,
    # and so for kernel time of its own: it was capped in 18 % of the samples.
    server = start_server(*GENEROUS, "--concurrency", "2")
    state = state_dir / "s0"
    manifest = {"entrypoint": "main.py", "timeout": 300, "memory_mb": 512}
    other = submit(server.url, {"main.py": HELD}, manifest).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, other), timeout=60)
    churner = submit(server.url, {"main.py": MEMORY_CHURNER}, manifest).json()["job_id"]
    caps: list[float | None] = []

    def readings(count: int) -> bool:
        caps.append(cpu_cap(state, churner))
        return len([cap for cap in caps if cap is not None]) >= count

    assert wait_until(lambda: readings(1) and caps[-1] == 0.1, timeout=60), f"caps: {caps}"
    caps.clear()
    assert wait_until(lambda: readings(200), timeout=120, interval=0.02)
    seen = [cap for cap in caps if cap is not None]
    capped = seen.count(0.1) / len(seen)
    (Layout.for_state(state).work / churner / "stop").write_text("")
    release(server.url, state, other)
    assert capped > 0.5, f"capped in {capped:.0%} of {len(seen)} readings"
    assert wait_finished(server.url, churner)["status"] == "completed"
    assert wait_finished(server.url, other)["status"] == "completed"
