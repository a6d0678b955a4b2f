"""One run of a job as the sandbox sees it: what it is asked to run (`RunSpec`), what it came to
(`RunResult`, read from nsjail's log, the exit status and the cgroups by `classify`), and the
outputs copied out of the job's work dir."""

import asyncio
import os
import re
import resource
import signal
from dataclasses import dataclass, field
from pathlib import Path

from jobrunner.sandbox import workdir
from jobrunner.sandbox.cgroups import JobCgroup
from jobrunner.wire import Failure

_SIGNAL = re.compile(r"terminated with signal: \w+ \((\d+)\)")
_EXITED = re.compile(r"exited with status: (\d+)")


@dataclass
class RunSpec:
    job_id: str
    job_dir: Path  # holds inputs/ (ours) and outputs/
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
    stdin: Path | None = None  # a file of the server's whose bytes are the job's standard input
    # Where `inputs/` (and the stdin file) wait, if not in `job_dir`: a dir on the staging tmpfs
    # (`Sandbox.staging`), removed once the work dir holds them.
    staged: Path | None = None
    inputs_bytes: int | None = None  # the inputs' sizes added up, if known

    @property
    def inputs_dir(self) -> Path:
        return (self.staged or self.job_dir) / "inputs"


@dataclass
class RunResult:
    exit_code: int | None
    failure: Failure | None
    cpu_seconds: float
    memory_peak_bytes: int
    outputs: list[workdir.Output] = field(default_factory=list)
    unlisted: int = 0  # outputs with a problem past those in `outputs`: counted only
    note: str | None = None  # one line for the job's log, saying why it stopped
    setup_seconds: float | None = None  # setting the jail up before the job's process started


async def collect_outputs(spec: RunSpec, work: Path, result: RunResult) -> None:
    """`copy_outputs` in a thread (it never holds the GIL for long, see `workdir.Patterns`)."""
    await asyncio.to_thread(copy_outputs, spec, work, result)


def little_to_copy(spec: RunSpec) -> bool:
    """Whether the job's set-up copies little (`workdir.LITTLE_INODES` files, `LITTLE_BYTES`)."""
    return (
        spec.stdin is None
        and spec.inputs_bytes is not None
        and spec.inputs_bytes <= workdir.LITTLE_BYTES
        and len(spec.inputs) <= workdir.LITTLE_INODES
    )


def copy_outputs(spec: RunSpec, work: Path, result: RunResult) -> None:
    """Copy the outputs out, at most the job's storage limit of them by size.
    Too many files, or more bytes than that, is `output_limit` unless the job had already
    failed for another reason (the first cause is the one reported)."""
    collected = workdir.collect(
        work,
        spec.job_dir / "outputs",
        spec.output_patterns,
        spec.inputs,
        spec.max_outputs,
        spec.storage_bytes,
    )
    result.outputs, result.unlisted = collected.outputs, collected.unlisted
    reasons = []
    if collected.too_many:
        reasons.append(f"more than {spec.max_outputs} output files; kept the first")
    if collected.left_out:
        reasons.append(
            f"{collected.left_out} output file(s) not kept: the outputs add up to more than "
            f"the storage limit of {spec.storage_bytes // 1_000_000} MB"
        )
    if reasons and result.failure is None:
        result.failure, result.note = "output_limit", "; ".join(reasons)


def classify(
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
