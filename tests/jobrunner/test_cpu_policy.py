"""The CPU policy's decisions, sample by sample, on scripted cgroup readings: the cases that real
jobs reach only now and then (a fork bomb throttled through a whole sample, a memory bomb freeing
its memory as it dies, a filler on a slow machine), and the memory rule on its own over any
sequence of samples. What the policy does to real jobs is in test_cpu_share.py."""

import asyncio
import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.sandbox import cpushare
from jobrunner.sandbox.cpushare import CpuShare

MiB = 2**20
# A filler's pace in bytes per CPU-second of its own (2 MiB bytearrays, each page a fault): 580 MiB
# on this project's host, 7.8 MiB in the qemu VM of ci/cgroup2-vm.sh under TCG with the host loaded.
SLOWEST_FILL_PACE = 7.8 * MiB


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


Sample = tuple[float, float, int, int]  # user s, system s, fork failures, memory bytes


class ScriptedCgroup:
    """Reads out one sample per policy sample; the job ends (its cgroup goes away) after the last
    one. With a clock, each sample is 0.1 s after the one before. The job faults in what its memory
    gains (a filler's faults), unless `churned` says how many bytes it faults in each sample."""

    def __init__(
        self, samples: list[Sample], clock: Clock | None = None, churned: int | None = None
    ) -> None:
        self.clock, self.samples, self.churned = clock, list(samples), churned
        self.current: tuple[float, float, int, int] | None = None
        self.bytes_faulted = 0
        self.caps: list[float | None] = []
        self.weights: list[int] = []
        self.capped_at = self.uncapped_after = 0.0

    def cpu_times(self) -> tuple[float, float]:
        if not self.samples:
            raise OSError("the job has ended")
        if self.clock:
            self.clock.now += 0.1
        before = self.current[3] if self.current else 0
        self.current = self.samples.pop(0)
        gained = max(0, self.current[3] - before)
        self.bytes_faulted += gained if self.churned is None else self.churned
        return self.current[0], self.current[1]

    def fork_failures(self) -> int:
        assert self.current is not None
        return self.current[2]

    def memory_used(self) -> int:
        assert self.current is not None
        return self.current[3]

    def faulted(self) -> int:
        return self.bytes_faulted

    def set_cpu_cap(self, cores: float | None) -> None:
        self.caps.append(cores)
        if self.clock:
            if cores is None:
                self.uncapped_after = self.clock.now - self.capped_at
            else:
                self.capped_at = self.clock.now

    def set_cpu_weight(self, weight: int) -> None:
        self.weights.append(weight)


def watch(samples: list[Sample], churned: int | None = None) -> ScriptedCgroup:
    """Run the policy over `samples` of one job while a plain job runs beside it throughout."""
    clock = Clock()
    share = CpuShare(clock)
    cgroup = ScriptedCgroup(samples, clock, churned)
    other = ScriptedCgroup([(0.01 * n, 0.0, 0, MiB) for n in range(1, 3 * len(samples))])

    async def main() -> None:
        beside = asyncio.create_task(share.watch("other", other, lambda seconds: None))
        await share.starting()
        await share.watch("job", cgroup, lambda seconds: None)
        beside.cancel()

    asyncio.run(main())
    return cgroup


@pytest.fixture(autouse=True)
def samples_at_once(monkeypatch):
    monkeypatch.setattr(cpushare, "FIRST_SAMPLES", ())
    monkeypatch.setattr(cpushare, "SAMPLE_SECONDS", 0)
    # The scripted cgroups' times cost nothing to read, but a test on a loaded machine must not
    # depend on that: every sample reads them (one test below costs them).
    monkeypatch.setattr(cpushare, "READING_SHARE", math.inf)


class ManyProcesses:
    """A steady job of many processes on cgroup v1: reading its CPU times costs 2 ms of CPU (the
    server reads each process's stat file); 50 samples, 0.1 s apart, then it ends."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.samples, self.readings = clock, 0, 0

    def cpu_times(self) -> tuple[float, float]:
        self.readings += 1
        spent = time.thread_time() + 0.002
        while time.thread_time() < spent:
            pass
        return 0.01 * self.samples, 0.0

    def fork_failures(self) -> int:  # read every sample, whether the times are read or not
        if self.samples == 50:
            raise OSError("the job has ended")
        self.samples += 1
        self.clock.now += 0.1
        return 0

    def memory_used(self) -> int:
        return 20 * MiB

    def faulted(self) -> int:
        return 20 * MiB


def test_costly_cpu_times_are_read_at_most_a_hundredth_of_the_time(monkeypatch):
    monkeypatch.setattr(cpushare, "READING_SHARE", 0.01)
    clock = Clock()
    job, reported = ManyProcesses(clock), []
    asyncio.run(CpuShare(clock).watch("job", job, reported.append))
    # 2 ms of reading at most once per 0.2 s of the job's 5 s; the first at once.
    assert 10 <= job.readings <= 26, job.readings
    assert reported == sorted(reported) and reported[0] == 0.0 and reported[-1] > 0.3


def test_a_capped_fork_bomb_stays_capped_through_a_quiet_sample():
    # Throttled for a whole sample, it failed no fork in it; it is still a fork bomb.
    failures = [0, 40, 80, 80, 120, 160]
    cgroup = watch([(0.01, 0.02 * n, f, 50 * MiB) for n, f in enumerate(failures)])
    assert cgroup.caps == [0.1]


def test_a_fork_bomb_that_stopped_is_uncapped_a_second_later():
    failures = [0, 40] + [40] * 12
    cgroup = watch([(0.01, 0.02, f, 50 * MiB) for f in failures])
    assert cgroup.caps == [0.1, None]
    assert cgroup.uncapped_after == pytest.approx(1.0, abs=0.15)  # within a sample


def test_a_memory_bomb_freeing_its_memory_as_it_dies_is_not_capped():
    # Demoted after half a CPU-second of page faults; then killed at its limit, it returns 512 MiB
    # to the kernel, in the kernel.
    memory = [64, 128, 256, 384, 512, 400, 250, 80]
    cgroup = watch([(0.05, 0.15 * (n + 1), 0, m * MiB) for n, m in enumerate(memory)])
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == [], "capped while filling or freeing its memory"


def test_a_demoted_job_busy_in_the_kernel_with_steady_memory_is_capped():
    cgroup = watch([(0.05, 0.3 * (n + 1), 0, 20 * MiB) for n in range(6)])
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == [0.1]


def test_a_demoted_job_churning_its_memory_in_the_kernel_is_capped():
    # 64 processes that map, write and unmap 2 MiB over and over: memory up and down by tens of
    # MiB every sample, never filling past its high or freeing below its low after the start.
    # Even were its faults its gains, highs and lows alone would judge it.
    memory = [40, 130, 45, 125, 50, 120, 47, 128, 48, 122, 46, 126]
    cgroup = watch([(0.05 * (n + 1), 0.3 * (n + 1), 0, m * MiB) for n, m in enumerate(memory)])
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == [0.1], "churning memory let it off the cap"


def test_a_churner_whose_memory_wanders_to_new_highs_and_lows_stays_capped():
    # Its 64 processes' memory wanders as they start and as the cap freezes them at random points
    # of their cycles: a new high now and then, and new lows after it. Each sample it faults in
    # 200 MiB (10 ms of page faults), far more than its memory moves.
    memory = [20, 40, 60, 70, 78, 83, 77, 75, 91, 84, 79, 73, 92, 81, 70, 66, 95, 60, 58, 55]
    samples = [(0.01 * (n + 1), 0.3 * (n + 1), 0, m * MiB) for n, m in enumerate(memory)]
    cgroup = watch(samples, churned=200 * MiB)
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == [0.1], "a new high or low let the churner off"


def test_a_job_filling_past_its_high_again_after_freeing_is_not_capped():
    # Frees a working set, then builds a larger one: each sample fills or frees for real.
    memory = [100, 200, 300, 150, 60, 320, 400, 480]
    cgroup = watch([(0.05, 0.15 * (n + 1), 0, m * MiB) for n, m in enumerate(memory)])
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == []


def test_a_demoted_job_filling_its_memory_on_a_slow_machine_is_not_capped():
    # At the slowest pace measured, on a machine so loaded that the job gets 40 ms of CPU per
    # sample: 0.3 MiB per sample, which a rule of 1 MiB per sample found not filling.
    pace = int(SLOWEST_FILL_PACE * 0.04)
    samples = [(0.01 * n, 0.03 * n, 0, 10 * MiB + n * pace) for n in range(1, 31)]
    cgroup = watch(samples)
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == [], "capped while filling its memory"


def test_a_capped_job_that_starts_filling_its_memory_slowly_is_uncapped():
    # A syscall storm with steady memory, capped; then it fills at the slowest pace measured, which
    # is 0.08 MiB in the 10 ms of CPU a capped job gets per sample.
    storm = [(0.05 * n, 0.3 * n, 0, 20 * MiB) for n in range(1, 7)]
    pace = int(SLOWEST_FILL_PACE * 0.01)
    filling = [(0.3, 1.8 + 0.01 * n, 0, 20 * MiB + n * pace) for n in range(1, 41)]
    cgroup = watch(storm + filling)
    assert cgroup.caps == [0.1, None], "a filler stayed capped"


CPU_PER_SAMPLE = st.floats(0.0, 0.25)  # nothing (v1 counts in ticks) up to two busy cores' worth


@given(
    pace=st.floats(SLOWEST_FILL_PACE, 4096 * MiB),
    base=st.integers(MiB, 64 * MiB),
    spent=st.lists(CPU_PER_SAMPLE, min_size=1, max_size=100),
)
def test_a_steady_filler_at_any_pace_is_judged_filling_throughout(pace, base, spent):
    memory, cpu = cpushare._Memory(), 0.0
    for seconds in spent:
        cpu += seconds
        used = base + int(pace * cpu)
        assert memory.moving(used, cpu, used)  # it faults in what it keeps


@given(
    low=st.integers(0, 256 * MiB),
    swing=st.integers(MiB, 256 * MiB),
    samples=st.lists(st.tuples(st.floats(0.0, 1.0), CPU_PER_SAMPLE), max_size=100),
)
def test_a_churner_that_has_been_at_its_high_and_low_is_never_judged_moving(low, swing, samples):
    # Even if it faults only what its memory gains (a slow churner): highs and lows judge it.
    high, memory = low + swing, cpushare._Memory()
    memory.moving(high, 1.0, high)  # filled up to its high
    memory.moving(low, 2.0, high)  # freed down to its low
    assert not memory.moving(low, 3.0, high)  # and a window of neither
    cpu, used, faulted = 3.0, low, high
    for where, seconds in samples:
        cpu += seconds
        now = low + int(where * swing)
        used, faulted = now, faulted + max(0, now - used)
        assert not memory.moving(used, cpu, faulted)


@given(
    start=st.integers(0, 256 * MiB),
    samples=st.lists(
        st.tuples(st.integers(-64 * MiB, 64 * MiB), st.integers(0, 256 * MiB), CPU_PER_SAMPLE),
        max_size=100,
    ),
)
def test_a_churner_that_faults_twice_what_its_memory_moves_is_never_judged_moving(start, samples):
    # Whatever highs and lows its memory reaches: in each sample it faults in more than twice the
    # bytes by which its memory moves (a fast churner), so over any window too.
    memory, used, cpu = cpushare._Memory(), start, 0.0
    faulted = 2 * start + 1  # its start: a new high, reached with churning
    assert not memory.moving(used, cpu, faulted)
    for move, extra, seconds in samples:
        used, cpu = max(0, used + move), cpu + seconds
        faulted += 2 * abs(move) + 1 + extra
        assert not memory.moving(used, cpu, faulted)


def test_the_first_samples_read_only_fork_failures_and_cap_a_fork_bomb_at_once(monkeypatch):
    """The first samples (FIRST_SAMPLES) read a job's failed forks alone, on the event loop's
    thread: a fork bomb sharing the host is capped at its first one; its CPU times and memory are
    read from the first full sample on."""
    monkeypatch.setattr(cpushare, "FIRST_SAMPLES", (0, 0, 0))
    clock = Clock()
    reads: list[str] = []

    class Bomb:
        """Fails 40 more forks every sample; ends after six samples, 10 ms apart."""

        def __init__(self) -> None:
            self.samples = 0
            self.caps: list[tuple[float | None, float]] = []

        def fork_failures(self) -> int:
            if self.samples == 6:
                raise OSError("the job has ended")
            self.samples += 1
            clock.now += 0.01
            reads.append("failures")
            return 40 * self.samples

        def cpu_times(self) -> tuple[float, float]:
            reads.append("times")
            return 0.0, 0.01 * self.samples

        def memory_used(self) -> int:
            reads.append("memory")
            return 50 * MiB

        def faulted(self) -> int:
            return 50 * MiB

        def set_cpu_cap(self, cores: float | None) -> None:
            self.caps.append((cores, clock.now))

    share, bomb = CpuShare(clock), Bomb()
    other = ScriptedCgroup([(0.01 * n, 0.0, 0, MiB) for n in range(1, 20)])

    async def main() -> None:
        beside = asyncio.create_task(share.watch("other", other, lambda seconds: None))
        await share.starting()
        await share.watch("bomb", bomb, lambda seconds: None)  # type: ignore[arg-type]
        beside.cancel()

    asyncio.run(main())
    assert bomb.caps == [(0.1, 100.01)]  # at its first sample
    early, full = reads[:3], reads[3:]
    assert early == ["failures"] * 3
    assert full == ["times", "failures", "memory"] * 3 + ["times"], full  # then it ended
