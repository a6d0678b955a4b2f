"""A job's teardown on the host's real cgroups (as root): an ended job's empty cgroups go with one
`rmdir` each, with no search for processes, whatever order the host lists its controllers in."""

import itertools
import os
from pathlib import Path

import pytest

from jobrunner.sandbox import cgroups as cgroups_module
from jobrunner.sandbox.cgroups import CONTROLLERS, Cgroups, JobCgroup


def _detected() -> Cgroups:
    found = Cgroups.detect(f"test-teardown-{os.getpid()}")
    assert found is not None, "no cgroup controllers: the sandbox tests need them"
    return found


def _orders() -> list[tuple[str, ...]]:
    """Every order a v1 host's mount table may list our controllers in (this one lists cpu
    first); v2 has one tree."""
    if _detected().version == 2:
        return [("unified",)]
    return list(itertools.permutations(CONTROLLERS))


@pytest.mark.parametrize("order", _orders())
def test_an_ended_jobs_cgroups_are_removed_without_a_search(order, monkeypatch):
    host = _detected()
    cgroups = Cgroups(host.version, {name: host.mounts[name] for name in order}, host.instance)
    cgroups.ensure_parents()
    searched: list[object] = []
    real = cgroups_module._kill_and_remove

    def recording(directories: list[Path], version: int, wait: float = 10.0) -> None:
        searched.append(directories)
        real(directories, version, wait)

    try:
        job = cgroups.create("ended-job", 64 * 2**20)
        monkeypatch.setattr(cgroups_module, "_kill_and_remove", recording)
        cgroups.remove("ended-job")  # no process ever entered: as after nsjail has ended
        assert all(not directory.exists() for directory in job.dirs)
        assert searched == [], "empty cgroups were searched for processes to kill"
    finally:
        monkeypatch.undo()
        cgroups.reap()  # removes this instance's parents too
        assert not any(directory.exists() for directory in cgroups._instance_dirs())


def _spares(cgroups: Cgroups) -> dict[str, list[str]]:
    return {
        name: sorted(p.name for p in (mount / cgroups.parent).iterdir() if p.name[0] == ".")
        for name, mount in cgroups.mounts.items()
    }


def test_spare_cgroups_become_the_next_jobs_with_each_jobs_own_memory_limit():
    """v1: a teardown makes the next jobs' cgroups ahead (one set per slot) and a set-up renames
    one to its job's id, its memory limits made the job's (lower or higher than the spare's);
    without a spare the job's are made as ever; a restart does not count spares as jobs left.
    v2 cannot rename a cgroup: no spares are made there, and jobs are as before."""
    cgroups = _detected()
    cgroups.ensure_parents(2)
    mib = 2**20
    try:
        cgroups.make_spares(512 * mib)
        cgroups.make_spares(512 * mib)  # one set per slot, however often asked
        spares = _spares(cgroups)
        if cgroups.version == 2:
            assert spares == {"unified": []}
        else:
            assert all(names == [".spare-0", ".spare-1"] for names in spares.values()), spares
        made: list[str] = []
        make = cgroups._create

        def counted(job_id: str, limit: int) -> JobCgroup:
            made.append(job_id)
            return make(job_id, limit)

        cgroups._create = counted  # type: ignore[method-assign]
        jobs = {
            job_id: (cgroups.create(job_id, limit * mib), limit)
            for job_id, limit in (("low", 64), ("high", 1024), ("fresh", 96))
        }
        assert all(names == [] for names in _spares(cgroups).values())
        # On v1 only the third was made in its set-up: the others took the spares as they were.
        assert made == (["fresh"] if cgroups.version == 1 else ["low", "high", "fresh"])
        for job, limit in jobs.values():
            if cgroups.version == 2:
                assert int((job.memory_dir / "memory.max").read_text()) == (limit + 16) * mib
                continue
            memory, pids, cpu = job.dirs
            assert int((memory / "memory.limit_in_bytes").read_text()) == limit * mib
            if cgroups.memsw:
                assert int((memory / "memory.memsw.limit_in_bytes").read_text()) == limit * mib
            if cgroups.tcp:
                tcp = int((memory / "memory.kmem.tcp.limit_in_bytes").read_text())
                assert tcp == limit * mib // 2
            assert (pids / "pids.max").read_text().strip() == "257"
            quota = (cpu / "jail" / "cpu.cfs_quota_us").read_text().strip()
            assert quota == (cpu / "jail" / "cpu.cfs_period_us").read_text().strip() == "100000"
        cgroups.make_spares(512 * mib)
        assert cgroups.reap() == 3  # the three jobs' cgroups, not the spares
    finally:
        cgroups.reap()
        assert not any(directory.exists() for directory in cgroups._instance_dirs())
