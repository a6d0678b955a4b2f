"""What a job reads instead of the host's system-wide /proc files (in the manner of LXCFS).

The jail's /proc is a real procfs of the jail's PID namespace, but many of its files describe the
whole host: its load, CPU and disk counters, interrupts, memory, pressure, its boot id. Those tell
one tenant what the others are doing (down to how many jobs run: /proc/cgroups counted the host's
cgroups, /proc/sys/fs/file-nr its open files), and a side channel needs nothing more. So each is
covered by a read-only bind of a file written here (`write` for each job, `write_shared` once for
what is alike for all jobs): what is true of the job where it can be
(MemTotal is the job's memory limit, the CPUs are those it may run on, the boot id is its own
random one), zeros or nothing where the job has nothing of its own (no load average, no disks, no
swap). The files are static: MemFree does not follow the job's use.

Kept as they are, because hiding them would gain nothing or break programs:
- /proc/uptime and the `btime` line of /proc/stat: the host's boot time is also
  `clock_gettime(CLOCK_BOOTTIME)` and the start time in every /proc/<pid>/stat, and `ps` combines
  them;
- /proc/cpuinfo (the CPU model: the `cpuid` instruction says as much) and /proc/version (uname);
- /proc/sys: the kernel's settings, read-only (the boot id below is covered);
- /proc/net/sockstat: its socket and TCP memory counts are the host's, but /proc/net is a link to
  /proc/self/net, a different path for every process, so no bind could cover it for all of them;
- /proc/self/cgroup: on cgroup v2 it names nsjail's own cgroup (`NSJAIL.<pid>`), so the job
  learns nsjail's host PID, nothing more (on v1 it is `/` for every controller);
- sysinfo(2): no namespace covers it, and seccomp could only make it fail, which would break
  glibc's getloadavg() (Python's os.getloadavg) and sysconf(_SC_PHYS_PAGES), both answered from it.
  So the host's load averages, total and free RAM, uptime and process count stay readable there
  (Docker's default profile allows it too).
"""

import functools
import os
import uuid
from pathlib import Path

# The host files covered, each by the file of that name (a directory for /proc/pressure).
EMPTY = ("diskstats", "partitions", "interrupts", "softirqs", "vmstat", "zoneinfo", "buddyinfo")
PRESSURE = ("cpu", "io", "memory")
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Host-wide counters that move with other jobs' work: open files, inodes and dentries in use.
FS_COUNTERS = {
    "file-nr": "0\t0\t{max}\n",
    "inode-nr": "0\t0\n",
    "dentry-state": "0\t0\t45\t0\t0\t0\n",
}


@functools.lru_cache(maxsize=16)  # a handful of limits in use; built for every job's set-up
def meminfo(memory_bytes: int) -> str:
    """The job's memory limit as the machine's memory, all of it free, no swap."""
    total = memory_bytes // 1024
    fields = {
        "MemTotal": total,
        "MemFree": total,
        "MemAvailable": total,
        **dict.fromkeys(("Buffers", "Cached", "SwapCached", "Active", "Inactive"), 0),
        **dict.fromkeys(("SwapTotal", "SwapFree", "Dirty", "Writeback", "AnonPages"), 0),
        **dict.fromkeys(("Mapped", "Shmem", "Slab", "SReclaimable", "SUnreclaim"), 0),
        "CommitLimit": total,
        "Committed_AS": 0,
    }
    lines = [f"{name + ':':<16}{value:>8} kB" for name, value in fields.items()]
    lines += ["HugePages_Total:       0", "HugePages_Free:        0", "Hugepagesize:       2048 kB"]
    return "\n".join(lines) + "\n"


def stat(cpus: int, boot_time: int) -> str:
    """Zero counters for each CPU the job may run on (glibc counts the `cpuN` lines when /sys is
    missing, as it is in the jail: `os.cpu_count()` and `multiprocessing` read them)."""
    zeros = " ".join(["0"] * 10)
    lines = [f"cpu  {zeros}", *(f"cpu{n} {zeros}" for n in range(cpus))]
    lines += ["intr 0", "ctxt 0", f"btime {boot_time}", "processes 0"]
    lines += ["procs_running 1", "procs_blocked 0", "softirq 0"]
    return "\n".join(lines) + "\n"


def cgroups() -> str:
    """The host's controllers, each with one cgroup (the job's): `num_cgroups` counted every
    cgroup on the host, so it rose and fell as other jobs started and ended."""
    try:
        with open("/proc/cgroups") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return ""
    out = lines[:1]
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) == 4:
            fields[2] = "1"
        out.append("\t".join(fields))
    return "\n".join(out) + "\n"


def _file_max() -> str:
    try:
        with open("/proc/sys/fs/file-max") as handle:
            return handle.read().strip()
    except OSError:
        return "0"


def _host_boot_time() -> int:
    with open("/proc/stat") as handle:
        for line in handle:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


# The files that differ between jobs: written for each job. Every other file is the same for all
# jobs of a server (nothing in it changes while the host runs): written once, at its start, and
# bound into every jail from there (read-only, root's: no job can change what another one reads).
# Writing all 17 files and a directory per job took 1.5 ms of each job's setup.
PER_JOB = ("meminfo", "boot_id")


def _target(name: str) -> str:
    if name == "boot_id":
        return BOOT_ID
    return f"/proc/sys/fs/{name}" if name in FS_COUNTERS else f"/proc/{name}"


def _binds(directory: Path, names: list[str]) -> list[tuple[Path, str]]:
    """The read-only binds (host file, path in the jail) of those of `names` the host has."""
    binds = [(directory / name, _target(name)) for name in names]
    return [(source, target) for source, target in binds if _host_has(target)]


@functools.cache
def _host_has(target: str) -> bool:
    """Whether the host has this /proc file (looked up once: every job's set-up asks, and the
    host's /proc does not change while it runs)."""
    return os.path.exists(target)


def write_shared(directory: Path) -> list[tuple[Path, str]]:
    """Write the files alike for every job into `directory` (new, readable by the jail users) and
    return their binds, for those the host has."""
    directory.mkdir(mode=0o711)
    cpus = len(os.sched_getaffinity(0))
    files = {
        "stat": stat(cpus, _host_boot_time()),
        "loadavg": "0.00 0.00 0.00 1/1 1\n",
        "swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        "cgroups": cgroups(),
        **dict.fromkeys(EMPTY, ""),
        **{name: text.format(max=_file_max()) for name, text in FS_COUNTERS.items()},
    }
    pressure = "".join(
        f"{kind} avg10=0.00 avg60=0.00 avg300=0.00 total=0\n" for kind in ("some", "full")
    )
    (directory / "pressure").mkdir(mode=0o755)  # listable, as the host's is
    for name in PRESSURE:
        _write(directory / "pressure" / name, pressure)
    for name, content in files.items():
        _write(directory / name, content)
    return _binds(directory, [*files, "pressure"])


def write(directory: Path, memory_bytes: int) -> list[tuple[Path, str]]:
    """Write one job's own files into `directory` (new, readable by the jail's user) and return
    their binds, for those the host has: they go with the binds of `write_shared`."""
    os.mkdir(directory, 0o711)
    _write(f"{directory}/meminfo", meminfo(memory_bytes))
    _write(f"{directory}/boot_id", f"{uuid.uuid4()}\n")
    return _binds(directory, list(PER_JOB))


def _write(path: Path | str, content: str) -> None:
    """A new read-only file: by descriptor (a text `open()` added an fstat, an ioctl and an lseek
    to each of a job's files), its mode set after the umask had its say."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    try:
        os.write(fd, content.encode())
        os.fchmod(fd, 0o444)  # whatever the umask
    finally:
        os.close(fd)
