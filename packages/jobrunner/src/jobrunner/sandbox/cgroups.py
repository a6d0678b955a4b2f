"""Per-job control groups, on cgroup v1 (separate controller mounts) or v2 (one unified tree).

nsjail puts each jail in a cgroup of its own (`NSJAIL.<pid>`) and removes it when the jail ends, so
each job gets a parent cgroup of ours around it: what the parent records (peak memory, CPU, OOM
kills) survives nsjail's cleanup and is read after the run, then the parent is removed.
"""

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PARENT = "jobrunner"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _mounts() -> list[tuple[str, str, set[str]]]:
    result = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _source, target, fstype, options, *_ = line.split()
        result.append((target, fstype, set(options.split(","))))
    return result


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _process_cpu_seconds(pids: Iterator[int]) -> float:
    """utime + stime of each process, plus what it collected from children it waited for."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended meanwhile
        total += sum(int(value) for value in fields[11:15])
    return total / _CLOCK_TICKS


@dataclass
class JobCgroup:
    """The parent cgroup(s) of one job."""

    version: int
    memory_dir: Path  # v1: the memory controller's job dir; v2: the unified job dir

    def peak_memory(self) -> int:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return _read_int(self.memory_dir / name) or 0

    def oom_killed(self) -> bool:
        if self.version == 2:
            for line in (self.memory_dir / "memory.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value) > 0
        return False

    def cpu_seconds(self) -> float:
        """CPU used so far by the processes in the job (for quotas while it runs)."""
        if self.version == 2:
            for line in (self.memory_dir / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            return 0.0
        return _process_cpu_seconds(self._pids())

    def _pids(self) -> Iterator[int]:
        for tasks in self.memory_dir.rglob("cgroup.procs"):
            try:
                yield from (int(pid) for pid in tasks.read_text().split())
            except OSError:
                continue

    def kill_all(self) -> None:
        """SIGKILL whatever is still in the job's cgroups (normally nothing: nsjail reaps all)."""
        for pid in self._pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)

    def remove(self) -> None:
        # Children first; nsjail normally removed its own already.
        for directory in sorted(self.memory_dir.rglob("*"), key=lambda p: -len(p.parts)):
            if directory.is_dir():
                with contextlib.suppress(OSError):
                    directory.rmdir()
        with contextlib.suppress(OSError):
            self.memory_dir.rmdir()


class Cgroups:
    """The host's cgroup layout and the nsjail flags that put a job under our parents."""

    def __init__(self, version: int, mounts: dict[str, Path]) -> None:
        self.version = version
        self.mounts = mounts  # v1: controller -> mount point; v2: {"unified": root}
        self.memsw = False

    @classmethod
    def detect(cls) -> "Cgroups | None":
        mounts = _mounts()
        for target, fstype, _options in mounts:
            if fstype == "cgroup2" and target == "/sys/fs/cgroup":
                return cls(2, {"unified": Path(target)})
        found: dict[str, Path] = {}
        for target, fstype, options in mounts:
            if fstype == "cgroup":
                for controller in ("memory", "pids", "cpu"):
                    if controller in options:
                        found.setdefault(controller, Path(target))
        if {"memory", "pids", "cpu"} <= found.keys():
            return cls(1, found)
        return None

    def ensure_parents(self) -> None:
        """Create our parent cgroups (they may vanish while we run, so before every job too)."""
        if self.version == 2:
            root = self.mounts["unified"]
            (root / PARENT).mkdir(exist_ok=True)
            for directory in (root, root / PARENT):
                _write(directory / "cgroup.subtree_control", "+memory +pids +cpu")
            return
        for mount in self.mounts.values():
            (mount / PARENT).mkdir(exist_ok=True)
        self.memsw = (self.mounts["memory"] / PARENT / "memory.memsw.limit_in_bytes").exists()

    def create(self, job_id: str) -> JobCgroup:
        self.ensure_parents()
        if self.version == 2:
            directory = self.mounts["unified"] / PARENT / job_id
            directory.mkdir()
            _write(directory / "cgroup.subtree_control", "+memory +pids +cpu")
            return JobCgroup(2, directory)
        directory = self.mounts["memory"] / PARENT / job_id
        directory.mkdir()
        return JobCgroup(1, directory)

    def flags(self, job: JobCgroup, memory_bytes: int) -> list[str]:
        """nsjail flags placing the jail under the job's parent, with its memory limit."""
        if self.version == 2:
            return [
                "--use_cgroupv2",
                "--cgroupv2_mount",
                str(job.memory_dir),
                "--cgroup_mem_max",
                str(memory_bytes),
                "--cgroup_mem_swap_max",
                "0",
            ]
        flags = [
            "--cgroup_mem_mount",
            str(self.mounts["memory"]),
            "--cgroup_mem_parent",
            f"{PARENT}/{job.memory_dir.name}",
            "--cgroup_mem_max",
            str(memory_bytes),
            "--cgroup_pids_mount",
            str(self.mounts["pids"]),
            "--cgroup_pids_parent",
            PARENT,
            "--cgroup_cpu_mount",
            str(self.mounts["cpu"]),
            "--cgroup_cpu_parent",
            PARENT,
        ]
        if self.memsw:  # without this, swap would let a job exceed its memory limit
            flags += ["--cgroup_mem_memsw_max", str(memory_bytes)]
        return flags
