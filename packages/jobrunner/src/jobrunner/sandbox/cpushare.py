"""How running jobs share the CPU, so that no job slows the others down.

Least attained service: a job that has used `DEMOTE_AFTER_CPU_SECONDS` is a long one (or a bomb);
from then on it gets a tenth of the default weight, so short jobs beside it run as if it were not
there, and it may still use a whole core when nothing else wants it.

A weight does not protect the others from a job busy in the kernel: kernel paths run until they
yield, whatever the weight, and contend for the kernel's shared locks. On a 2-core host a fork
bomb at a tenth of the weight still took the run time p99 of short jobs beside it from 90 ms to
650 ms. So a job that ran into its process limit (a fork bomb) in the last sample, or, once
demoted, spent most of its CPU time in the kernel (a syscall storm), is "heavy" and is capped at
`HEAVY_CAP` cores while other jobs run. A job that starts caps the heavy ones before it runs, so
it never shares the CPU with an uncapped one; the cap lifts once a heavy job has been alone for
`CAP_LINGER_SECONDS` or is no longer heavy. A fork bomb stays heavy until it has failed no fork
for as long: capped, it can spend a whole sample throttled (its kernel time runs past the quota
and is paid back), and lifting the cap at that one quiet sample let it loose again.

A job whose memory grows or shrinks is busy in the kernel too (each new page is a fault the kernel
serves, each freed one is returned), but it is not heavy while it fills or frees: the filling ends
at its memory limit, the freeing when its memory is gone (a memory bomb frees 512 MiB as it dies of
its limit), and a cap would only make it hold its memory and its slot for longer. A memory bomb
beside other jobs, capped, held its slot for 1.3 s instead of 0.6 s, and the jobs queued behind it
waited that long. Only filling and freeing are exempt, though, not memory that merely moves: a
job that maps, writes and unmaps the same memory over and over (64 processes churning 2 MiB each)
is a syscall storm, which a "grew or shrank by 1 MiB in the sample" rule capped in only 12-22 % of
the samples (the jobs beside it: run time p90 96 ms instead of 46 ms). So the job fills when its
memory rises `CHURN_BYTES` above the highest it had before, and frees when it falls that much below
the lowest it had since it last filled: both are bounded by the memory limit, once per high; a
churning job does neither once it has been at its high and its low. Both must also keep what the
job faulted: the memory moved by at least `KEPT_SHARE` of the bytes it faulted in since the last
judgment. A filler keeps all it faults and a freer faults next to nothing; a fast churner faults
many times what its memory moves, whatever the machine's pace, so the new highs and lows it still
reaches now and then (the memory of 64 processes wanders) do not let it off: by highs and lows
alone, a new high let it off for every MiB it then fell back, and a fresh CI machine capped it
in 26 % of the samples. A slow churner (a big block mapped in one sample and unmapped in a later
one) keeps what it faults within each sample; highs and lows catch it. Each judgment stands until
the next, and the next comes at the next MiB or after `FILL_CPU_SECONDS` of the job's own CPU time,
not after a sample: a pace in bytes per CPU-second of the job's own, which the cap, the load on the
machine and the length of a sample do not change.
Per sample, a capped job (10 ms of CPU in it) had to fill at 100 MiB per CPU-second to be let off,
and a filler whose page faults are slow (cgroup v2 in a qemu VM under TCG emulation, host loaded:
7.8 MiB per CPU-second, 580 on the host) stayed capped once capped. The price of the exemption
stays a MiB of the job's own memory limit per judgment, which lasts at most `FILL_CPU_SECONDS` of
its CPU time (and the sample after it, before the cap is back). A transparent huge page is one
fault for 2 MiB, so a churner of huge pages passes the faults' test and only highs and lows judge
it; its kernel time is then mostly the zeroing of whole pages, not a storm of faults.
"""

import asyncio
import contextlib
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jobrunner.sandbox.cgroups import JobCgroup

DEMOTE_AFTER_CPU_SECONDS = 0.5
DEMOTED_WEIGHT = 10  # on cgroup v2's scale, where 100 is the default
HEAVY_SYSTEM_SHARE = 0.5  # system time over all CPU time, judged on at least...
JUDGE_CPU_SECONDS = 0.03  # ...this much CPU time (several samples of a capped job)
CHURN_BYTES = 2**20  # filled or freed within...
FILL_CPU_SECONDS = 0.25  # ...this much CPU time: its kernel time is its own (page faults)
KEPT_SHARE = 0.5  # of the bytes faulted in that time, the memory moved by at least this much
HEAVY_CAP = 0.1  # cores
CAP_LINGER_SECONDS = 1.0
SAMPLE_SECONDS = 0.1
# Reading a job's CPU times costs the server CPU of its own; on cgroup v1 it reads every process's
# /proc/PID/stat (3.2 ms a sample for a fork bomb's 256 processes). They are read again only once
# the sampler's CPU for the last reading is at most this share of the time since (see `_watch`).
READING_SHARE = 0.01
# A fork bomb reaches its process limit within tens of milliseconds and slows everything from then
# on: the first samples come sooner.
FIRST_SAMPLES = (0.02, 0.03, 0.05)


@dataclass
class _Memory:
    """Whether a job's memory is filling or freeing at `CHURN_BYTES` per `FILL_CPU_SECONDS` of its
    own CPU time at least, as opposed to going up and down. A window of CPU time fills when the
    memory rises `CHURN_BYTES` above the highest it had before the window, frees when it falls that
    much below the lowest it had since it last filled, and ends there, or as neither after
    `FILL_CPU_SECONDS`; either counts only if the memory moved by `KEPT_SHARE` of the bytes the job
    faulted in the window. Its judgment stands until the next window's."""

    high: int = 0  # the most memory it had in any sample
    low: int = 0  # the least it had since it last filled
    cpu: float = 0.0  # CPU-seconds used when the window began
    high_before: int = 0  # `high` and `low` when the window began
    low_before: int = 0
    used_before: int = 0  # the memory used and the bytes faulted when the window began
    faulted_before: int = 0
    judgment: bool = False  # whether the last window filled or freed

    def moving(self, used: int, cpu: float, faulted: int) -> bool:
        """Record a sample (memory used, CPU-seconds used so far, bytes faulted so far); the last
        judgment."""
        self.high, self.low = max(self.high, used), min(self.low, used)
        self.cpu = min(self.cpu, cpu)  # v1 sums the live processes (see _Split)
        self.faulted_before = min(self.faulted_before, faulted)  # the same, for the jail's cgroup
        filled = used >= self.high_before + CHURN_BYTES
        freed = used <= self.low_before - CHURN_BYTES
        if filled or freed or cpu - self.cpu >= FILL_CPU_SECONDS:
            kept = abs(used - self.used_before) >= KEPT_SHARE * (faulted - self.faulted_before)
            self.judgment = (filled or freed) and kept
            if filled and kept:
                self.low = used
            self.cpu, self.high_before, self.low_before = cpu, self.high, self.low
            self.used_before, self.faulted_before = used, faulted
        return self.judgment


@dataclass
class _Split:
    """Whether a job spends most of its CPU time in the kernel, judged on at least
    `JUDGE_CPU_SECONDS` of it: a capped job gets a hundredth of a second per sample, and v1 counts
    CPU time in ticks of that size, so one sample's split says nothing (it flapped the cap off
    and on in a third of the samples of a capped syscall storm)."""

    user: float = 0.0  # the CPU times when the split was last judged
    system: float = 0.0
    in_kernel: bool = False  # the last judgment

    def busy_in_kernel(self, user: float, system: float) -> bool:
        # v1 sums the live processes, so a sample can go down when some of them end.
        self.user, self.system = min(self.user, user), min(self.system, system)
        spent_user, spent_system = user - self.user, system - self.system
        if spent_user + spent_system >= JUDGE_CPU_SECONDS:
            self.in_kernel = spent_system > HEAVY_SYSTEM_SHARE * (spent_user + spent_system)
            self.user, self.system = user, system
        return self.in_kernel


@dataclass
class _Running:
    cgroup: JobCgroup
    demoted: bool = False
    heavy: bool = False
    forked_at: float | None = None  # when it last ran into its process limit
    capped: bool = False
    memory: _Memory = field(default_factory=_Memory)
    split: _Split = field(default_factory=_Split)


class CpuShare:
    """The CPU policy over every job one sandbox runs (used from the event loop's thread)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._running: dict[str, _Running] = {}
        self._shared_at = -CAP_LINGER_SECONDS  # when more than one job last ran

    async def starting(self) -> None:
        """A job is about to start: cap the heavy jobs now, not at their next sample."""
        self._shared_at = self.clock()
        heavy = [job for job in self._running.values() if job.heavy and not job.capped]
        for job in heavy:
            job.capped = True
        if heavy:
            await asyncio.to_thread(_set_caps, [job.cgroup for job in heavy], HEAVY_CAP)

    async def watch(self, job_id: str, cgroup: JobCgroup, on_cpu: Callable[[float], None]) -> None:
        """Sample one job's CPU until cancelled: report its use as it grows, demote it, cap it."""
        job = self._running[job_id] = _Running(cgroup)
        try:
            await self._watch(job, on_cpu)
        finally:
            del self._running[job_id]

    async def _watch(self, job: _Running, on_cpu: Callable[[float], None]) -> None:
        # A fork bomb's CPU times, read ten times a second, were the largest part of the server's
        # own CPU in the hostile benchmark (15 % of its samples, 2.8 s a minute): now they are read
        # about three times a second, and cheap readings (cgroup v2's one file, a job of a few
        # processes) still every sample. Between readings the judgments see the last times: those
        # on CPU time (demotion, the split, the memory's windows) come a little later, those on
        # fork failures and memory do not wait.
        failures_before = 0
        user = system = 0.0
        times_due = -math.inf
        filling_or_freeing = busy_in_kernel = False
        for n in itertools.count():
            early = n < len(FIRST_SAMPLES)
            await asyncio.sleep(FIRST_SAMPLES[n] if early else SAMPLE_SECONDS)
            if early:
                # In its first 0.1 s a job of one core cannot have used the CPU that demotes it
                # (DEMOTE_AFTER_CPU_SECONDS): only a fork bomb's failed forks make it heavy so
                # soon. They are read alone, here (a file or three: a trip to a thread cost more
                # than the reading, and a hello world's first sample came just as its jail ended);
                # its CPU and memory from the first full sample on, at most 0.1 s later.
                try:
                    failures = job.cgroup.fork_failures()
                except OSError:
                    return  # as below
            else:
                try:
                    times, reading, failures, memory, faulted = await asyncio.to_thread(
                        _sample, job.cgroup, self.clock() >= times_due
                    )
                except OSError:
                    return  # the job is ending right now: its cgroups are going away
                if times is not None:
                    (user, system), times_due = times, self.clock() + reading / READING_SHARE
                    on_cpu(user + system)
                filling_or_freeing = job.memory.moving(memory, user + system, faulted)
                busy_in_kernel = job.split.busy_in_kernel(user, system) and not filling_or_freeing
            if len(self._running) > 1:
                self._shared_at = self.clock()
            if not job.demoted and user + system >= DEMOTE_AFTER_CPU_SECONDS:
                job.demoted = True
                with contextlib.suppress(OSError):  # the same; or a write the kernel refused
                    await asyncio.to_thread(job.cgroup.set_cpu_weight, DEMOTED_WEIGHT)
            if failures > failures_before:
                job.forked_at = self.clock()
            forking = (
                job.forked_at is not None and self.clock() - job.forked_at < CAP_LINGER_SECONDS
            )
            job.heavy = forking or (job.demoted and busy_in_kernel)
            shared = self.clock() - self._shared_at < CAP_LINGER_SECONDS
            if (job.heavy and shared) != job.capped:
                job.capped = not job.capped
                cap = HEAVY_CAP if job.capped else None
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(job.cgroup.set_cpu_cap, cap)
            failures_before = failures


def _sample(
    cgroup: JobCgroup, with_times: bool
) -> tuple[tuple[float, float] | None, float, int, int, int]:
    """(CPU times if asked for, the CPU-seconds their reading took, fork failures, memory used,
    bytes faulted). The reading is timed on this thread's CPU clock: a thread that waited for a
    core meanwhile has not spent that time."""
    times, started = None, time.thread_time()
    if with_times:
        times = cgroup.cpu_times()
    reading = time.thread_time() - started
    return times, reading, cgroup.fork_failures(), cgroup.memory_used(), cgroup.faulted()


def _set_caps(cgroups: list[JobCgroup], cores: float) -> None:
    for cgroup in cgroups:
        with contextlib.suppress(OSError):  # that job may be ending right now
            cgroup.set_cpu_cap(cores)
