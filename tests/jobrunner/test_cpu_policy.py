"""The CPU policy's decisions, sample by sample, on scripted cgroup readings: the cases that real
jobs reach only now and then (a fork bomb throttled through a whole sample, a memory bomb freeing
its memory as it dies). What the policy does to real jobs is in test_cpu_share.py."""

import asyncio

import pytest

from jobrunner.sandbox import cpushare
from jobrunner.sandbox.cpushare import CpuShare

MiB = 2**20


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


Sample = tuple[float, float, int, int]  # user s, system s, fork failures, memory bytes


class ScriptedCgroup:
    """Reads out one sample per policy sample; the job ends (its cgroup goes away) after the last
    one. With a clock, each sample is 0.1 s after the one before."""

    def __init__(self, samples: list[Sample], clock: Clock | None = None) -> None:
        self.clock, self.samples = clock, list(samples)
        self.current: tuple[float, float, int, int] | None = None
        self.caps: list[float | None] = []
        self.weights: list[int] = []
        self.capped_at = self.uncapped_after = 0.0

    def cpu_times(self) -> tuple[float, float]:
        if not self.samples:
            raise OSError("the job has ended")
        if self.clock:
            self.clock.now += 0.1
        self.current = self.samples.pop(0)
        return self.current[0], self.current[1]

    def fork_failures(self) -> int:
        assert self.current is not None
        return self.current[2]

    def memory_used(self) -> int:
        assert self.current is not None
        return self.current[3]

    def set_cpu_cap(self, cores: float | None) -> None:
        self.caps.append(cores)
        if self.clock:
            if cores is None:
                self.uncapped_after = self.clock.now - self.capped_at
            else:
                self.capped_at = self.clock.now

    def set_cpu_weight(self, weight: int) -> None:
        self.weights.append(weight)


def watch(samples: list[Sample]) -> ScriptedCgroup:
    """Run the policy over `samples` of one job while a plain job runs beside it throughout."""
    clock = Clock()
    share = CpuShare(clock)
    cgroup = ScriptedCgroup(samples, clock)
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
    memory = [40, 130, 45, 125, 50, 120, 47, 128, 48, 122, 46, 126]
    cgroup = watch([(0.05 * (n + 1), 0.3 * (n + 1), 0, m * MiB) for n, m in enumerate(memory)])
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == [0.1], "churning memory let it off the cap"


def test_a_job_filling_past_its_high_again_after_freeing_is_not_capped():
    # Frees a working set, then builds a larger one: each sample fills or frees for real.
    memory = [100, 200, 300, 150, 60, 320, 400, 480]
    cgroup = watch([(0.05, 0.15 * (n + 1), 0, m * MiB) for n, m in enumerate(memory)])
    assert cgroup.weights == [cpushare.DEMOTED_WEIGHT]
    assert cgroup.caps == []
