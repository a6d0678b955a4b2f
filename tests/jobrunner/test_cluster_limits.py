"""The cluster's rate limits (`jobrunner.cluster.limits`) on a real redis-server, against the
embedded limiter: for any history of submits and CPU a client has in the store, the cluster's
verdict (allowed or not, the reasons, Retry-After, the CPU and jobs reported) is the one the
embedded limiter gives for the same history, and a reservation is taken exactly when allowed."""

import asyncio
import math

import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobrunner.cluster.limits import ClusterLimits, Reservation
from jobrunner.cluster.store import Store
from jobrunner.ratelimit import Limits, RateLimiter, Verdict

KEY = "203.0.113.7"
LIMITS = Limits(concurrent=3, per_hour=8, cpu_seconds=10.0, cpu_window=60.0)

# Ages are a whole number of seconds and a half, so that the few milliseconds between seeding the
# store and its script reading the clock never move a Retry-After across a whole second. Some
# ages are beyond the windows: those entries have expired and count for nothing.
submit_ages = st.lists(st.integers(0, 4000).map(lambda s: s + 0.5), max_size=14)
cpu_entries = st.lists(
    st.tuples(st.integers(0, 90).map(lambda s: s + 0.5), st.integers(1, 24).map(lambda q: q / 4)),
    max_size=10,
)


def opened(url: str) -> Store:
    """The store, through a client that waits as long as a busy machine needs (the product's
    short timeouts are not what these tests are about)."""
    return Store(aioredis.from_url(url, socket_connect_timeout=60), request_timeout=60)


def store_now(loop: asyncio.AbstractEventLoop, store: Store) -> float:
    async def read() -> float:
        seconds, micros = await store.client.time()
        return seconds + micros / 1e6

    return loop.run_until_complete(read())


def seed(
    loop: asyncio.AbstractEventLoop,
    store: Store,
    active: int,
    submits: list[float],
    cpu: list[tuple[float, float]],
    summed: bool = True,
) -> None:
    """The client's history, written as the scripts write it (scores are times), with the CPU's
    running sum beside it, or without (a store written before the sum existed)."""

    async def write() -> None:
        client = store.client
        await client.flushall()
        if active:
            await client.hset(f"jr:rl:{KEY}", "active", str(active))
        if submits:
            await client.zadd(f"jr:rlsub:{KEY}", {f"token{n}": at for n, at in enumerate(submits)})
        if cpu:
            entries = {f"job{n}:{amount:.6f}": at for n, (at, amount) in enumerate(cpu)}
            await client.zadd(f"jr:rlcpu:{KEY}", entries)
            if summed:  # every entry charged, none expired yet: expiry is the script's
                await client.set(f"jr:rlcpusum:{KEY}", repr(sum(a for _, a in cpu)))

    loop.run_until_complete(write())


def embedded(
    limits: Limits, now: float, active: int, submits: list[float], cpu: list[tuple[float, float]]
) -> Verdict:
    """The embedded limiter's verdict for the same history, at the moment `now`."""
    limiter = RateLimiter(limits, clock=lambda: now)
    client = limiter._client(KEY)
    client.active = active
    client.submits.extend(sorted(submits))
    client.cpu.extend(sorted(cpu))
    return limiter.verdict(KEY)


# One redis-server for every example: each one starts with FLUSHALL (`seed`).
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    active=st.integers(0, 4),
    ages=submit_ages,
    cpu=cpu_entries,
    take=st.booleans(),
    summed=st.booleans(),
)
def test_the_cluster_judges_any_history_as_the_embedded_limiter(
    redis_server, active, ages, cpu, take, summed
):
    loop = asyncio.new_event_loop()
    store = opened(redis_server.url)
    try:
        limits = ClusterLimits(store, LIMITS)
        now = store_now(loop, store)
        submits = [now - age for age in ages]
        used = [(now - age, amount) for age, amount in cpu]
        seed(loop, store, active, submits, used, summed)
        got = loop.run_until_complete(limits.reserve(KEY) if take else limits.verdict(KEY))
        # The script read the store's clock between these two readings: its verdict is the
        # embedded one at one of them (the ages keep a busy machine's delay from mattering).
        later = store_now(loop, store)
        expected = {embedded(LIMITS, at, active, submits, used) for at in (now, later)}
        if not take:
            assert got in expected
        elif isinstance(got, Reservation):
            assert any(verdict.allowed for verdict in expected)
            assert int(redis_server.cli("HGET", f"jr:rl:{KEY}", "active")) == active + 1
        else:
            assert got in expected and not got.allowed
            assert int(redis_server.cli("HGET", f"jr:rl:{KEY}", "active") or 0) == active
    finally:
        loop.run_until_complete(store.close())
        loop.close()


def test_a_long_history_is_judged_from_its_counts(redis_server):
    """A client with thousands of submits in its hour (a generous operator's limit): the verdict
    counts them all and waits for the one that must expire."""
    generous = Limits(concurrent=100, per_hour=3000, cpu_seconds=1000.0, cpu_window=3600.0)
    loop = asyncio.new_event_loop()
    store = opened(redis_server.url)
    try:
        now = store_now(loop, store)
        # 3,000 submits, one a second, the oldest 3,000.5 s ago; 400 jobs of 2.5 CPU-s each.
        submits = [now - 3000.5 + n for n in range(3000)]
        used = [(now - 3000.5 + n * 7, 2.5) for n in range(400)]
        seed(loop, store, 0, submits, used)
        got = loop.run_until_complete(ClusterLimits(store, generous).verdict(KEY))
        later = store_now(loop, store)
        assert got in {embedded(generous, at, 0, submits, used) for at in (now, later)}
        assert not got.allowed and got.cpu_used == 1000.0
        assert "Hourly limit reached: 3000/3000" in got.reason
        assert "CPU quota exhausted: 1000.0/1000" in got.reason
        # The oldest submit, and the first CPU entry (whose expiry brings the CPU under the
        # limit), are both 3,000.5 s old: 599.5 s to go, less however long the call took.
        assert got.retry_after is not None and 1 <= got.retry_after <= math.ceil(599.5)
    finally:
        loop.run_until_complete(store.close())
        loop.close()
