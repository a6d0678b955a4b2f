"""What the CPU policy and a job's record read from a job's cgroups, on files laid out as each
cgroup version's kernel writes them (Documentation/admin-guide/cgroup-v2.rst and cgroup-v1/
memory.rst, pids.rst): the v2 readings too, which a v1 host's sandbox tests never reach."""

import os
from pathlib import Path

from jobrunner.sandbox.cgroups import JobCgroup

PAGE = os.sysconf("SC_PAGE_SIZE")


def write(directory: Path, **files: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name.replace("_", ".", 1)).write_text(text)


def test_v2_readings(tmp_path):
    job = tmp_path / "job"
    write(
        job,
        cpu_stat="usage_usec 3500000\nuser_usec 1250000\nsystem_usec 2250000\n"
        "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
        memory_stat="anon 4194304\nfile 0\npgfault 2048\npgmajfault 3\nthp_fault_alloc 0\n",
        memory_events="low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n",
        pids_events="max 7\n",
    )
    write(job / "NSJAIL.42", pids_events="max 5\n")  # where nsjail's child has the limit
    cgroup = JobCgroup(2, job, [job])
    assert cgroup.cpu_times() == (1.25, 2.25)
    assert cgroup.faulted() == 2048 * PAGE
    assert cgroup.oom_killed()
    assert cgroup.fork_failures() == 12


def test_v1_readings(tmp_path):
    memory, pids, cpu = (tmp_path / name / "job" for name in ("memory", "pids", "cpu"))
    write(
        memory,
        memory_stat="cache 0\nrss 4194304\npgfault 10\ntotal_rss 8388608\ntotal_pgfault 3000\n",
    )
    write(pids, pids_events="max 0\n")
    write(pids / "jail", pids_events="max 9\n")
    write(cpu)
    cgroup = JobCgroup(1, memory, [memory, pids, cpu])
    assert cgroup.faulted() == 3000 * PAGE  # the jail's child cgroup included
    assert not cgroup.oom_killed()  # v1 tells it by the exit status, not by a file
    assert cgroup.fork_failures() == 9


def test_a_key_of_another_kind_is_passed_over(tmp_path):
    job = tmp_path / "job"
    write(job, memory_stat="pgfault 5\nsome_future_key 1 2\n", pids_events="max 0\n")
    assert JobCgroup(2, job, [job]).faulted() == 5 * PAGE
