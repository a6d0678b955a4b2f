"""Per-job control groups, on cgroup v1 (separate controller mounts) or v2 (one unified tree).

Every server instance owns one subtree, `jobrunner/<instance>` (the instance id is derived from its
state dir), in each controller it uses; each job gets `jobrunner/<instance>/<job_id>` in all of
them. nsjail itself is started inside the job's cgroups, so:
- the job's cgroup namespace is rooted at its own cgroup and `/proc/self/cgroup` names no host path;
- what the job's cgroup records (peak memory, CPU, OOM kills) survives nsjail's cleanup;
- everything a server started (nsjail included) can be found and killed by a later start of the
  same instance, and never anything of another instance on the same host.

On v2, nsjail puts the jail in a child of its own (`NSJAIL.<pid>`) with the pids and CPU limits.
On v1 the server sets those limits itself, on the cgroups nsjail is started in (pids: the job's;
CPU: its child `jail`, where a quota may go below the job's), and the jail stays where nsjail is:
nsjail moving its child into cgroups of its own takes the kernel's host-wide lock on cgroup
migrations, which waits for an RCU grace period (12 ms of every job's start on a 2-core host).
The process that starts nsjail enters its cgroups by writing `0` to their `tasks` files: a thread
moving itself takes no such lock (and that shell has one thread, so the process moves).

On v1 a job's cgroups are made ahead, while no job waits for them (`make_spares`, after a job's
teardown): a job's set-up then renames a spare set to its id (0.03 ms) instead of making its four
cgroups and limits (0.23 ms, a twentieth of what the server adds to a hello world). v2 refuses to
rename a cgroup, so there every job's are made in its set-up.
"""

import contextlib
import functools
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = "jobrunner"
SERVER_LEAF = "server"  # a delegated subtree's leaf that holds the server itself
UNIFIED = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
DEFAULT_WEIGHT = 100  # cgroup v2's `cpu.weight` default (v1: `cpu.shares` 1024)
CAP_PERIOD_US = 100_000  # the CFS bandwidth period of a capped job
PIDS_MAX = 256  # processes of one jail: fork bombs stop here
JAIL_LEAF = "jail"  # v1: the job's CPU child that holds nsjail and the jail, with the quota
SPARE = ".spare-"  # v1: a spare set's name is this and a number (a job id never has a dot)
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _mounts() -> list[tuple[str, str, set[str]]]:
    result = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _source, target, fstype, options, *_ = line.split()
        result.append((target, fstype, set(options.split(","))))
    return result


class CgroupsUnavailable(RuntimeError):
    """No usable cgroups for this server; the message says why."""


def _own_cgroup() -> str:
    """This process's cgroup v2 path (the `0::` line of /proc/self/cgroup)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise CgroupsUnavailable("this process is in no cgroup v2 cgroup")


def _write(path: Path, value: str) -> None:
    """One write to a control file. Plain descriptors, not `open()`'s text stack: a job's set-up
    and samples make a dozen of these, and `open()` added an fstat, an ioctl and an lseek to each
    (the kernel applies or refuses a control-file write whole, so one `write` is all of it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    """A control file's (small) contents, read as `_write` writes."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def _counts(path: Path) -> dict[str, int]:
    """A control file of `key value` lines (`memory.stat`, `cpu.stat`, the `.events` files)."""
    counts = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):  # a kernel's new key of another kind
            counts[key] = int(value)
    return counts


def _read_int(path: Path) -> int | None:
    try:
        return int(_read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _process_cpu_times(pids: Iterator[int]) -> tuple[float, float]:
    """(user, system) seconds of each process, plus those of the children it waited for."""
    user = system = 0
    for pid in pids:
        # `_read`, not Path.read_text: a fork bomb's 255 processes are read ten times a second,
        # and the text layer doubled the cost (7.5 ms a sample against 3.2 ms, measured).
        try:
            fields = _read(Path(f"/proc/{pid}/stat")).rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended meanwhile
        # utime, stime, cutime, cstime (fields 14 to 17 of proc(5); state is field 3)
        user += int(fields[11]) + int(fields[13])
        system += int(fields[12]) + int(fields[14])
    return user / _CLOCK_TICKS, system / _CLOCK_TICKS


def _cgroups_below(directory: Path) -> Iterator[Path]:
    """`directory` and every cgroup below it, parents first (none if it is gone). A cgroup's
    directory holds dozens of control files and few children: only the directories are followed
    (`rglob` matched a pattern against every file, twice a sample of every running job)."""
    pending = [directory]
    while pending:
        here = pending.pop()
        try:
            with os.scandir(here) as entries:
                children = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:  # gone meanwhile (or never there)
            continue
        yield here
        pending += children


def _pids_below(directories: list[Path]) -> Iterator[int]:
    for directory in directories:
        for cgroup in _cgroups_below(directory):
            try:
                yield from (int(pid) for pid in _read(cgroup / "cgroup.procs").split())
            except OSError:
                continue


def _kill_and_remove(directories: list[Path], version: int, wait: float = 10.0) -> None:
    """SIGKILL every process below `directories`, wait until they are gone, remove the cgroups."""
    existing = [d for d in directories if d.is_dir()]
    deadline = time.monotonic() + wait
    while True:
        if version == 2:
            for directory in existing:
                with contextlib.suppress(OSError):
                    _write(directory / "cgroup.kill", "1")
        pids = list(_pids_below(existing))
        if not pids or time.monotonic() > deadline:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        time.sleep(0.01)  # a killed process leaves its cgroup once the kernel has reaped it
    for directory in existing:
        # Children first; a cgroup can only be removed when it has no children and no processes.
        for child in sorted(directory.rglob("*"), key=lambda p: -len(p.parts)):
            if child.is_dir():
                with contextlib.suppress(OSError):
                    child.rmdir()
        with contextlib.suppress(OSError):
            directory.rmdir()


@dataclass
class JobCgroup:
    """The cgroups of one job: one per controller on v1, one on v2."""

    version: int
    memory_dir: Path  # v1: the memory controller's job dir; v2: the unified job dir
    dirs: list[Path]  # every controller's job dir (v2: just memory_dir)

    @functools.cached_property  # the command line's, and the floor benchmark's
    def procs_files(self) -> list[Path]:
        """Where a process writes `0` to put itself in the job (on v2 in a leaf: no internal
        processes in a cgroup whose controllers are enabled for its children). On v1 the `tasks`
        files, moving the writing thread: unlike a write to `cgroup.procs`, that takes no
        host-wide lock (see the module's docstring); the CPU one is the job's `jail` leaf."""
        if self.version == 2:
            return [self.memory_dir / "supervisor" / "cgroup.procs"]
        memory, pids, cpu = self.dirs
        return [memory / "tasks", pids / "tasks", cpu / JAIL_LEAF / "tasks"]

    def peak_memory(self) -> int:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return _read_int(self.memory_dir / name) or 0

    def memory_used(self) -> int:
        """Bytes charged to the job now (its processes' memory and its tmpfs files)."""
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return _read_int(self.memory_dir / name) or 0

    def faulted(self) -> int:
        """Bytes the job's processes have faulted in so far: page faults (a transparent huge
        page's fault counts once) times the page size. v1's `total_` counts cover the jail's
        child cgroup too; v2's counts are always recursive."""
        key = "total_pgfault" if self.version == 1 else "pgfault"
        return _counts(self.memory_dir / "memory.stat").get(key, 0) * _PAGE_BYTES

    def oom_killed(self) -> bool:
        if self.version == 2:
            return _counts(self.memory_dir / "memory.events").get("oom_kill", 0) > 0
        return False

    def cpu_times(self) -> tuple[float, float]:
        """(user, system) CPU-seconds used so far by the processes in the job."""
        if self.version == 2:
            stat = _counts(self.memory_dir / "cpu.stat")
            return stat.get("user_usec", 0) / 1e6, stat.get("system_usec", 0) / 1e6
        return _process_cpu_times(_pids_below([self.memory_dir]))

    def fork_failures(self) -> int:
        """How many times a process of the job could not fork because of its pids limit (the
        kernel counts it in the cgroup that has the limit: nsjail's child of the job's)."""
        pids_dir = self.memory_dir if self.version == 2 else self.dirs[CONTROLLERS.index("pids")]
        total = 0
        for cgroup in _cgroups_below(pids_dir):
            with contextlib.suppress(OSError):  # gone meanwhile
                total += _counts(cgroup / "pids.events").get("max", 0)
        return total

    @property
    def cpu_dir(self) -> Path:
        return self.memory_dir if self.version == 2 else self.dirs[CONTROLLERS.index("cpu")]

    def set_cpu_weight(self, weight: int) -> None:
        """The job's share of contended CPU against the other jobs (v2's scale: 100 = the
        default; v1's `cpu.shares` is that times 1024/100). Its quota (one core) stays."""
        if self.version == 2:
            _write(self.cpu_dir / "cpu.weight", str(weight))
        else:
            _write(self.cpu_dir / "cpu.shares", str(max(2, weight * 1024 // DEFAULT_WEIGHT)))

    def set_cpu_cap(self, cores: float | None) -> None:
        """At most `cores` of CPU time for the jail (None: back to its one core), over a
        short period so that a capped job runs in small slices rather than in long bursts.
        v1 refuses a parent quota below a child's, so there it goes on the job's child cgroup
        `jail`, which holds nsjail and the jail; v2 takes the smaller of the two, so the job's
        own cgroup will do."""
        quota = round((cores or 1.0) * CAP_PERIOD_US)
        if self.version == 2:
            _write(self.cpu_dir / "cpu.max", f"{quota} {CAP_PERIOD_US}")
            return
        for child in self.cpu_dir.iterdir():
            if child.is_dir():
                # Period first: with the old (longer) one, the new quota would be a larger share.
                _write(child / "cpu.cfs_quota_us", "-1")
                _write(child / "cpu.cfs_period_us", str(CAP_PERIOD_US))
                _write(child / "cpu.cfs_quota_us", str(quota))

    def kill_all(self) -> None:
        """SIGKILL whatever is still in the job's cgroups (normally nothing: nsjail reaps all)."""
        for pid in _pids_below(self.dirs):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)

    def remove(self) -> None:
        _kill_and_remove(self.dirs, self.version)


class Cgroups:
    """The host's cgroup layout and the nsjail flags that put a job under our cgroups."""

    def __init__(self, version: int, mounts: dict[str, Path], instance: str = "default") -> None:
        self.version = version
        self.mounts = mounts  # v1: controller -> mount point; v2: {"unified": root}
        self.instance = instance
        self.memsw = False
        self.tcp = False
        self.slots = 1  # jobs run at once: the jobs' groups weigh as much as that many processes
        self._spares: deque[tuple[str, int]] = deque()  # v1: (name, memory limit) made ahead
        self._spare_names = itertools.count()
        self._making = 0  # spares being made now (by the teardown threads)
        self._spares_lock = threading.Lock()

    @classmethod
    def detect(cls, instance: str = "default") -> "Cgroups | None":
        mounts = _mounts()
        for target, fstype, _options in mounts:
            if fstype == "cgroup2" and target == "/sys/fs/cgroup":
                return cls(2, {"unified": Path(target)}, instance)
        found: dict[str, Path] = {}
        for target, fstype, options in mounts:
            if fstype == "cgroup":
                for controller in CONTROLLERS:
                    if controller in options:
                        found.setdefault(controller, Path(target))
        if set(CONTROLLERS) <= found.keys():
            return cls(1, found, instance)
        return None

    @classmethod
    def delegated(cls, instance: str = "default") -> "Cgroups":
        """The cgroup v2 subtree delegated to this (unprivileged) server: its own cgroup, as
        systemd's `Delegate=yes` hands a service. cgroup v2 lets a cgroup with processes enable
        no controllers for its children, so the server first moves itself into the leaf
        `<own>/server` (or finds itself there already), then enables them on `<own>`; the jobs'
        cgroups go below `<own>/jobrunner/<instance>`. Raises CgroupsUnavailable naming what is
        missing: a job is never run without its memory, pids and CPU limits."""
        if not (UNIFIED / "cgroup.controllers").exists():
            raise CgroupsUnavailable(
                f"rootless mode needs the unified cgroup v2 hierarchy at {UNIFIED} "
                "(this host runs cgroup v1 or a hybrid)"
            )
        own = UNIFIED / _own_cgroup().lstrip("/")
        delegated = own.parent if own.name == SERVER_LEAF else own
        missing = set(CONTROLLERS) - set((delegated / "cgroup.controllers").read_text().split())
        if missing:
            raise CgroupsUnavailable(
                f"the cgroup {delegated} lacks the controllers {' '.join(sorted(missing))} "
                "(systemd: Delegate=yes gives a service its cgroup with them)"
            )
        try:
            (delegated / SERVER_LEAF).mkdir(exist_ok=True)
            if own != delegated / SERVER_LEAF:
                _write(delegated / SERVER_LEAF / "cgroup.procs", str(os.getpid()))
            _write(delegated / "cgroup.subtree_control", "+memory +pids +cpu")
        except OSError as error:
            raise CgroupsUnavailable(
                f"cannot use the cgroup {delegated} as this server's own subtree ({error.strerror}:"
                " it must be delegated to this user, as systemd's Delegate=yes does, and hold no "
                "process but this server)"
            ) from None
        return cls(2, {"unified": delegated}, instance)

    @property
    def parent(self) -> str:
        return f"{ROOT}/{self.instance}"

    def _instance_dirs(self) -> list[Path]:
        return [mount / self.parent for mount in self.mounts.values()]

    def ensure_parents(self, slots: int | None = None) -> None:
        """Create our parent cgroups (at start; they may vanish while we run: `create` makes
        them again when it finds them gone), weighted for `slots` jobs at once."""
        if slots is not None:
            self.slots = slots
        if self.version == 2:
            root = self.mounts["unified"]
            (root / self.parent).mkdir(parents=True, exist_ok=True)
            for directory in (root, root / ROOT, root / self.parent):
                _write(directory / "cgroup.subtree_control", "+memory +pids +cpu")
        else:
            for directory in self._instance_dirs():
                directory.mkdir(parents=True, exist_ok=True)
            memory = self.mounts["memory"] / self.parent
            self.memsw = (memory / "memory.memsw.limit_in_bytes").exists()
            self.tcp = (memory / "memory.kmem.tcp.limit_in_bytes").exists()
        self._weigh_parents()

    def _weigh_parents(self) -> None:
        """The scheduler weighs a cgroup as one task against the processes and cgroups beside
        it: at the default weight, all running jobs together got the CPU of one process when
        the server's threads and anything else on the host were busy too. Our groups weigh as
        `slots` processes (v1 `cpu.shares` 1024 each, v2 `cpu.weight` 100 each); the top
        `jobrunner` group, shared by the host's servers, keeps the largest of their weights."""
        if self.version == 2:
            root, name, unit, most = self.mounts["unified"], "cpu.weight", 100, 10_000
        else:
            root, name, unit, most = self.mounts["cpu"], "cpu.shares", 1024, 262_144
        ours = min(most, unit * max(1, self.slots))
        with contextlib.suppress(OSError):  # a host that refuses keeps the default, as before
            top = root / ROOT / name
            _write(top, str(max(ours, _read_int(top) or 0)))
            _write(root / self.parent / name, str(ours))

    def reap(self) -> int:
        """Kill and remove what an earlier run of this instance left (after a SIGKILL, say).

        Returns how many job cgroups were found."""
        first = self._instance_dirs()[0]
        found = 0
        if first.is_dir():
            found = sum(1 for c in first.iterdir() if c.is_dir() and not c.name.startswith(SPARE))
        self._spares.clear()
        _kill_and_remove(self._instance_dirs(), self.version)
        return found

    def remove(self, job_id: str) -> None:
        """Kill what is in the job's cgroups and remove them, whichever exist: a job whose setup
        failed may have some of them, or none."""
        directories = [directory / job_id for directory in self._instance_dirs()]
        if self.version == 2:
            leaf = directories[0] / "supervisor"
        else:
            # By name: `mounts` is in the host's mount-table order, not CONTROLLERS' (by index,
            # this named another controller's job dir on a host listing cpu first, and every
            # teardown fell through to the search below).
            leaf = self.mounts["cpu"] / self.parent / job_id / JAIL_LEAF
        with contextlib.suppress(OSError):  # only if empty, as below
            leaf.rmdir()
        # The usual end of a job: nsjail has ended, its jail with it, and (v2) it has removed the
        # cgroups it made. The kernel removes a cgroup only if it holds no process and no child
        # cgroup, so this removes the empty ones and nothing else; whatever is left is killed and
        # searched for children. (Searching always took 1.5 ms of every job's teardown.)
        left = []
        for directory in directories:
            try:
                directory.rmdir()
            except FileNotFoundError:
                continue
            except OSError:
                left.append(directory)
        if left:
            _kill_and_remove(left, self.version)

    def make_spares(self, memory_bytes: int) -> None:
        """v1: make spare sets (one per slot at most, limited for `memory_bytes`) for the next
        jobs' `create`. Blocks for a quarter of a millisecond a set: a teardown's thread calls
        it. A failure is left to the set-up, which then makes its job's cgroups itself."""
        if self.version != 1:
            return
        with self._spares_lock:
            wanted = self.slots - len(self._spares) - self._making
            if wanted <= 0:
                return
            self._making += wanted
        try:
            for _ in range(wanted):
                name = f"{SPARE}{next(self._spare_names)}"
                try:
                    self._create(name, memory_bytes)
                except OSError:
                    self.remove(name)
                    return
                self._spares.append((name, memory_bytes))
        finally:
            with self._spares_lock:
                self._making -= wanted

    def create(self, job_id: str, memory_bytes: int) -> JobCgroup:
        try:
            spare, made_for = self._spares.popleft()
        except IndexError:
            pass
        else:
            try:
                return self._adopt(spare, made_for, job_id, memory_bytes)
            except OSError:  # our parents were removed while we ran, say: made anew below
                self.remove(job_id)
                self.remove(spare)
        try:
            return self._create(job_id, memory_bytes)
        except FileNotFoundError:  # our parents were removed while we ran
            self.remove(job_id)  # what `_create` made before it failed
            self.ensure_parents()
            return self._create(job_id, memory_bytes)

    def _create(self, job_id: str, memory_bytes: int) -> JobCgroup:
        if self.version == 2:
            directory = self.mounts["unified"] / self.parent / job_id
            directory.mkdir()
            (directory / "supervisor").mkdir()  # nsjail's own leaf, beside the jail's
            # memory.max here bounds nsjail and the jail together, socket buffers included
            # (v2 charges them to memory.current).
            _write(directory / "memory.max", str(memory_bytes + 16 * 2**20))
            _write(directory / "cgroup.subtree_control", "+memory +pids +cpu")
            return JobCgroup(2, directory, [directory])
        dirs = [self.mounts[c] / self.parent / job_id for c in CONTROLLERS]
        for directory in dirs:
            directory.mkdir()
        memory, pids, cpu = dirs
        # The limits nsjail sets on v2 (see `flags`), set here: nsjail and its jail share them,
        # so nsjail counts as one of the pids, and takes next to no CPU of the jail's core.
        _write(pids / "pids.max", str(PIDS_MAX + 1))
        (cpu / JAIL_LEAF).mkdir()
        _write(cpu / JAIL_LEAF / "cpu.cfs_period_us", str(CAP_PERIOD_US))
        _write(cpu / JAIL_LEAF / "cpu.cfs_quota_us", str(CAP_PERIOD_US))  # one core
        self._limit_memory(memory, memory_bytes, raising=False)
        return JobCgroup(1, memory, dirs)

    def _adopt(self, spare: str, made_for: int, job_id: str, memory_bytes: int) -> JobCgroup:
        """v1: the spare set `spare` (limited for `made_for` bytes) renamed to the job's."""
        dirs = [self.mounts[c] / self.parent / job_id for c in CONTROLLERS]
        for directory in dirs:
            os.rename(directory.with_name(spare), directory)
        if memory_bytes != made_for:
            self._limit_memory(dirs[0], memory_bytes, raising=memory_bytes > made_for)
        return JobCgroup(1, dirs[0], dirs)

    def _limit_memory(self, memory: Path, memory_bytes: int, *, raising: bool) -> None:
        """v1: the job's memory limits. The kernel keeps the memory+swap limit at least the
        memory limit: raising, that one goes first."""
        # The memory limits are ours, on the job's cgroup, not nsjail's (which would put them on a
        # child it creates): v1 charges a socket's buffers only to the cgroup the socket was
        # created in, and only if that cgroup has a TCP limit of its own.
        names = ["memory.limit_in_bytes"]
        if self.memsw:  # without this, swap would let a job exceed its memory limit
            names.insert(0 if raising else 1, "memory.memsw.limit_in_bytes")
        for name in names:
            _write(memory / name, str(memory_bytes))
        if self.tcp:
            # v1 does not charge TCP buffers to memory.limit_in_bytes; they have a counter of
            # their own, off until a limit is set. Without it, loopback sockets inside the job's
            # network namespace hold kernel memory far beyond the job's limit. Half the limit:
            # the kernel still grants every socket a small minimum beyond it (about 60 KiB,
            # with at most 1024 descriptors), so buffers plus that stay within the job's limit.
            _write(memory / "memory.kmem.tcp.limit_in_bytes", str(memory_bytes // 2))

    def flags(self, job: JobCgroup, memory_bytes: int) -> list[str]:
        """nsjail flags placing the jail under the job's cgroups, with its limits."""
        if self.version == 2:
            return [
                "--use_cgroupv2",
                "--cgroupv2_mount",
                str(job.memory_dir),
                "--cgroup_mem_max",
                str(memory_bytes),
                "--cgroup_mem_swap_max",
                "0",
                "--cgroup_pids_max",
                str(PIDS_MAX),
                "--cgroup_cpu_ms_per_sec",
                "1000",  # one core, however many threads the job starts
            ]
        # v1: none; the jail stays in the cgroups nsjail was started in, whose limits `create`
        # set (nsjail's own cgroup flags would move it, see the module's docstring).
        return []
