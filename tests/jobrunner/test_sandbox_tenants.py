"""What one job can learn about, or take from, the jobs beside it and the host: each running job is
a host user of its own (per-user kernel limits are not shared), and the host-wide /proc files show
the job's own values. Real jobs in the real nsjail sandbox."""

import json
import os
from pathlib import Path

import pytest

from jobrunner.sandbox.layout import Layout
from support.jobclient import GENEROUS, log_of, run_job, submit, wait_finished
from support.servers import wait_until

MiB = 2**20
PIPE_PAGES = MiB // 4096  # a pipe grown to 1 MiB holds this many pages

# Holds `n` pipes grown to 1 MiB until the test puts `go` into its work dir.
PIPE_HOARDER = """
import fcntl, os, sys, time
pipes = []
for _ in range(int(sys.argv[1])):
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 2**20)
    pipes.append((read, write))
print("holding", len(pipes), flush=True)
while not os.path.exists("go"):
    time.sleep(0.05)
"""
PIPE_GROWER = """
import fcntl, os
read, write = os.pipe()
try:
    print("grown to", fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 2**20))
except OSError as error:
    print("refused:", error.strerror)
"""


def test_a_job_cannot_use_up_another_jobs_pipe_buffers(start_server, state_dir):
    # The kernel counts pipe buffer pages per host user, and refuses an unprivileged user
    # F_SETPIPE_SZ once it holds more than fs.pipe-user-pages-soft pages (new pipes get two pages).
    # So the hoarder takes exactly the soft limit: if both jobs were one host user, the second
    # job's pipe would take it over.
    soft = int(Path("/proc/sys/fs/pipe-user-pages-soft").read_text())
    pipes = soft // PIPE_PAGES
    if soft == 0 or pipes > 400:  # no limit; or more pipes than the jail's 1024 descriptors hold
        pytest.skip(f"fs.pipe-user-pages-soft is {soft}: not a limit this test can reach")
    server = start_server(*GENEROUS, "--concurrency", "2")
    manifest = {"entrypoint": "main.py", "args": [str(pipes)], "timeout": 120}
    hoarder = submit(server.url, {"main.py": PIPE_HOARDER}, manifest).json()["job_id"]
    assert wait_until(lambda: "holding" in log_of(server.url, hoarder), timeout=60), log_of(
        server.url, hoarder
    )
    assert f"holding {pipes}" in log_of(server.url, hoarder)
    grower = run_job(server.url, PIPE_GROWER)
    assert f"grown to {MiB}" in log_of(server.url, grower["job_id"])
    (Layout.for_state(state_dir / "s0").work / hoarder / "go").write_text("")
    assert wait_finished(server.url, hoarder)["status"] == "completed"


def test_each_running_job_is_a_host_user_of_its_own(start_server, state_dir):
    server = start_server(*GENEROUS, "--concurrency", "2")
    hold = "import os, time\nprint('held', flush=True)\nwhile not os.path.exists('go'):\n"
    hold += "    time.sleep(0.05)\nprint(os.getuid(), os.getgid(), os.stat('.').st_uid)\n"
    jobs = [submit(server.url, {"main.py": hold}, {"entrypoint": "main.py"}) for _ in range(2)]
    job_ids = [response.json()["job_id"] for response in jobs]
    work = Layout.for_state(state_dir / "s0").work
    assert wait_until(lambda: all("held" in log_of(server.url, j) for j in job_ids), timeout=60)
    owners = {(work / job_id).stat().st_uid for job_id in job_ids}
    for job_id in job_ids:
        (work / job_id / "go").write_text("")
    for job_id in job_ids:
        assert wait_finished(server.url, job_id)["status"] == "completed"
        assert "65534 65534 65534" in log_of(server.url, job_id)  # inside: nobody, as before
    assert len(owners) == 2, f"both work dirs belong to one host user: {owners}"
    from jobrunner.sandbox import ids  # (after the check that fails on a single shared user)

    assert all(ids.DEFAULT_BASE <= uid < ids.DEFAULT_BASE + ids.RANGE_SIZE for uid in owners)


READ_PROC = """
import json, os
files = ["/proc/loadavg", "/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/interrupts",
         "/proc/softirqs", "/proc/vmstat", "/proc/zoneinfo", "/proc/buddyinfo", "/proc/swaps",
         "/proc/partitions", "/proc/sys/kernel/random/boot_id", "/proc/cgroups",
         "/proc/sys/fs/file-nr", "/proc/sys/fs/inode-nr", "/proc/sys/fs/dentry-state"]
if os.path.isdir("/proc/pressure"):
    files += ["/proc/pressure/" + name for name in sorted(os.listdir("/proc/pressure"))]
seen = {}
for path in files:
    try:
        with open(path) as handle:
            seen[path] = handle.read()
    except OSError as error:
        seen[path] = "error: " + error.strerror
print(json.dumps(seen))
"""


def _cpu_lines(stat: str) -> int:
    return sum(1 for line in stat.splitlines() if line.startswith("cpu") and line[3].isdigit())


def _field(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(name)).split()[1]


def test_host_wide_proc_files_show_the_jobs_own_values(server):
    record = run_job(server.url, READ_PROC, memory_mb=256)
    log = log_of(server.url, record["job_id"])
    assert record["status"] == "completed", log
    seen = json.loads(log.splitlines()[0])
    host_boot_id = Path("/proc/sys/kernel/random/boot_id").read_text()
    assert seen["/proc/sys/kernel/random/boot_id"].strip() not in ("", host_boot_id.strip())
    assert _field(seen["/proc/meminfo"], "MemTotal:") == str(256 * 1024)  # kB: the job's limit
    assert _field(Path("/proc/meminfo").read_text(), "MemTotal:") != str(256 * 1024)
    assert seen["/proc/loadavg"].split()[:3] == ["0.00", "0.00", "0.00"]
    host_stat = Path("/proc/stat").read_text()
    assert _field(seen["/proc/stat"], "cpu ") == "0"  # no host CPU counters
    assert _field(host_stat, "cpu ") != "0"
    # One line per CPU the job may run on: glibc counts them for os.cpu_count() (no /sys here).
    assert _cpu_lines(seen["/proc/stat"]) == len(os.sched_getaffinity(0))
    for name in ("diskstats", "interrupts", "softirqs", "vmstat", "zoneinfo", "buddyinfo"):
        assert seen[f"/proc/{name}"] == "", name
    assert seen["/proc/swaps"].count("\n") == 1  # the header, no swap
    # Counters that moved with other jobs: how many cgroups (jobs) and open files the host has.
    counts = [line.split("\t")[2] for line in seen["/proc/cgroups"].splitlines()[1:]]
    assert counts and set(counts) == {"1"}, seen["/proc/cgroups"]
    assert seen["/proc/sys/fs/file-nr"].split()[:2] == ["0", "0"]
    assert seen["/proc/sys/fs/inode-nr"].split() == ["0", "0"]
    assert seen["/proc/sys/fs/dentry-state"].split()[:2] == ["0", "0"]
    pressure = [path for path in seen if path.startswith("/proc/pressure/")]
    assert pressure == [] or all("total=0" in seen[path] for path in pressure)
    if Path("/proc/pressure").is_dir():
        assert pressure, "the job saw no /proc/pressure at all"


def test_common_programs_work_with_the_jobs_proc_files(server):
    code = """
import multiprocessing, os, subprocess
print("load", os.getloadavg())
print("cpus", os.cpu_count(), multiprocessing.cpu_count())
with multiprocessing.Pool(2) as pool:
    print("pool", sum(pool.map(abs, range(-10, 0))))
print(subprocess.run(["free", "-m"], capture_output=True, text=True, check=True).stdout)
"""
    record = run_job(server.url, code, memory_mb=256)
    log = log_of(server.url, record["job_id"])
    assert record["status"] == "completed", log
    # glibc answers getloadavg() with sysinfo(2), which no namespace covers (see procfs.py): it
    # still works, with the host's numbers.
    assert "load (" in log
    cpus = len(os.sched_getaffinity(0))
    assert f"cpus {cpus} {cpus}" in log
    assert "pool 55" in log
    mem = next(line for line in log.splitlines() if line.startswith("Mem:"))
    assert mem.split()[1] == "256", log
