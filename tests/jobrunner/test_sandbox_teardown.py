"""A job's teardown on the host's real cgroups (as root): an ended job's empty cgroups go with one
`rmdir` each, with no search for processes, whatever order the host lists its controllers in."""

import itertools
import os
from pathlib import Path

import pytest

from jobrunner.sandbox import cgroups as cgroups_module
from jobrunner.sandbox.cgroups import CONTROLLERS, Cgroups


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
