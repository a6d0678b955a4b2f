"""The fair queue (jobrunner.scheduling) against a simple model: every job's slot time kept as a
plain list of (start, end) spans, the choice recomputed from it by brute force."""

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrunner.scheduling import Queued, Scheduler
from servekit import rate_key

WINDOW = 50.0
SHORT = 3.0
PATIENCE = 40.0
# Four addresses; the last two are one IPv6 /64, so one client for the queue. The queue takes the
# clients' rate keys, as the HTTP edge derives them (the domain layer parses no addresses).
ADDRESSES = ["10.0.0.1", "10.0.0.2", "2001:db8::1", "2001:db8::2"]
CLIENTS = [rate_key(address) for address in ADDRESSES]


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Model:
    """What the scheduler should know, kept the plain way."""

    clock: Clock
    queued: list[tuple[str, str, int]] = field(default_factory=list)  # (job, key, arrival)
    spans: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)

    def slot_time(self, key: str) -> float:
        since = self.clock.now - WINDOW
        total = 0.0
        for start, end in self.spans.get(key, []):
            end = self.clock.now if end is None else end
            total += max(0.0, end - max(start, since))
        return total

    def least(self) -> set[str]:
        """The job ids that may be chosen (reserve aside): the head of a client with the least
        slot time, ties going to the head that arrived first."""
        heads: dict[str, tuple[int, str]] = {}
        for job, key, arrival in self.queued:
            heads.setdefault(key, (arrival, job))
        if not heads:
            return set()
        best = min((self.slot_time(key), arrival) for key, (arrival, _) in heads.items())
        return {
            job for key, (arrival, job) in heads.items() if (self.slot_time(key), arrival) == best
        }


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 3), st.sampled_from([1, 3, 300])),
        st.tuples(st.just("tick"), st.integers(1, 30)),
        st.tuples(st.just("take"), st.integers(0, 3)),
        st.tuples(st.just("finish"), st.integers(0, 10)),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(operations, st.integers(0, 2))
def test_the_scheduler_agrees_with_the_model(ops, reserved):
    clock = Clock()
    slots = 3
    scheduler = Scheduler(
        window=WINDOW,
        short_job=SHORT,
        slots=slots,
        reserved=reserved,
        patience=PATIENCE,
        clock=clock,
    )
    model = Model(clock)
    running: list[Queued] = []
    added = 0

    def take(free: int) -> Queued | None:
        order = scheduler.order()
        assert order == [job for job, _, _ in sorted(model.queued, key=order_key)]
        # Each job's position is counted, not looked up in the sorted order: the two agree.
        assert [scheduler.position(job) for job in order] == list(range(len(order)))
        assert len(scheduler) == len(order)
        allowed = [job for job in order if job in heads() and may_start(job)] if free > 0 else []
        short = {job: is_short(job) for job in allowed}
        entry = scheduler.take(free)
        if not allowed:
            assert entry is None
            return None
        # The first in the order that may start: first of all (whose client held the least) unless
        # it is long and the long jobs' slots are taken.
        assert entry is not None and entry.job_id == allowed[0]
        if entry.job_id == order[0]:
            assert entry.job_id in model.least()
        queued = next(item for item in model.queued if item[0] == entry.job_id)
        # FIFO within a client: nothing of its own came before it.
        assert all(key != entry.key for _, key, _ in model.queued[: model.queued.index(queued)])
        model.queued.remove(queued)
        if not short[entry.job_id]:
            long_running.add(entry.job_id)
        scheduler.started(entry)
        model.spans.setdefault(entry.key, []).append((clock.now, None))
        running.append(entry)
        # Nothing else changed: the rest start in the order they had.
        assert (
            scheduler.order()
            == order[: order.index(entry.job_id)] + order[order.index(entry.job_id) + 1 :]
        )
        return entry

    def order_key(item: tuple[str, str, int]) -> tuple[float, int]:
        _, key, arrival = item
        return (model.slot_time(key), arrival)

    def heads() -> set[str]:
        """Each client's first queued job: the only one of its that may start."""
        firsts: dict[str, str] = {}
        for job, key, _ in model.queued:
            firsts.setdefault(key, job)
        return set(firsts.values())

    def short_by_history(key: str) -> bool:
        spans = model.spans.get(key, [])
        ended = [s for s in spans if s[1] is not None and s[1] > clock.now - WINDOW]
        ongoing = [s for s in spans if s[1] is None]
        return bool(ended) and model.slot_time(key) <= SHORT * (len(ended) + len(ongoing))

    def short_clients_about() -> bool:
        return any(short_by_history(key) for key in model.spans)

    timeouts: dict[str, int] = {}
    queued_at: dict[str, float] = {}
    long_running: set[str] = set()

    def is_short(job: str) -> bool:
        key = next(k for j, k, _ in model.queued if j == job)
        return timeouts[job] <= SHORT or short_by_history(key)

    def may_start(job: str) -> bool:
        waited = clock.now - queued_at[job] >= PATIENCE
        room = len(long_running) < slots - reserved
        return is_short(job) or waited or room or not short_clients_about()

    for op in ops:
        if op[0] == "add":
            job = f"job{added}"
            added += 1
            timeouts[job] = op[2]
            queued_at[job] = clock.now
            entry = scheduler.add(job, CLIENTS[op[1]], op[2])
            model.queued.append((job, entry.key, entry.seq))
        elif op[0] == "tick":
            clock.now += op[1]
        elif op[0] == "take":
            take(min(op[1], slots - len(running)))
        elif running:
            entry = running.pop(op[1] % len(running))
            long_running.discard(entry.job_id)
            scheduler.finished(entry)
            spans = model.spans[entry.key]
            index = spans.index(next(s for s in spans if s[1] is None))
            spans[index] = (spans[index][0], clock.now)
        assert len(scheduler) == len(model.queued)
        for key in CLIENTS:
            assert abs(scheduler.slot_time(key) - model.slot_time(key)) < 1e-6
        scheduler.sweep()

    # Every queued job starts, as slots free and time passes.
    for _ in range(4 * (len(model.queued) + len(running)) + 4):
        if not model.queued:
            break
        if take(slots - len(running)) is None:
            if running:
                entry = running.pop(0)
                long_running.discard(entry.job_id)
                scheduler.finished(entry)
                spans = model.spans[entry.key]
                index = spans.index(next(s for s in spans if s[1] is None))
                spans[index] = (spans[index][0], clock.now)
            clock.now += 1
    assert not model.queued and len(scheduler) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=30))
def test_position_is_the_start_order_when_nothing_changes(history):
    """Clients with slot time behind them queue jobs; taking them one by one (no time passing,
    nothing ending) starts them in the order `order()` gave, ranked by slot time."""
    clock = Clock()
    scheduler = Scheduler(slots=8, window=WINDOW, reserved=0, clock=clock)
    for n, (client, held) in enumerate(history):
        entry = scheduler.add(f"past{n}", CLIENTS[client], 300)
        assert scheduler.take(1) == entry
        scheduler.started(entry)
        clock.now += held
        scheduler.finished(entry)
    for n in range(8):
        scheduler.add(f"job{n}", CLIENTS[n % 4], 300)
    order = scheduler.order()
    positions = {job: scheduler.position(job) for job in order}
    started = []
    while (entry := scheduler.take(4)) is not None:
        started.append(entry.job_id)
    assert started == order and [positions[job] for job in started] == list(range(8))
    times = [scheduler.slot_time(CLIENTS[int(job[3:]) % 4]) for job in started]
    assert times == sorted(times)


def test_a_long_job_kept_from_the_reserved_slot_starts_once_it_has_waited_patience():
    clock = Clock()
    scheduler = Scheduler(
        window=WINDOW, short_job=SHORT, slots=2, reserved=1, patience=PATIENCE, clock=clock
    )
    short = scheduler.add("short", CLIENTS[0], 300)
    assert scheduler.take(2) == short
    scheduler.started(short)
    scheduler.finished(short)  # a client about whose jobs were short
    first = scheduler.add("long", CLIENTS[1], 300)
    assert scheduler.take(2) == first  # the one slot for long jobs
    scheduler.started(first)
    scheduler.add("long2", CLIENTS[2], 300)
    assert scheduler.take(1) is None  # only the reserved slot free
    clock.now += PATIENCE - 1
    assert scheduler.take(1) is None
    clock.now += 1
    assert scheduler.take(1) is not None and len(scheduler) == 0


def test_a_removed_or_requeued_job_leaves_or_takes_its_place_in_the_order():
    """`remove` (a cancel) and `requeue` (its environment is being built) keep the count and
    every position in step with the order."""
    clock = Clock()
    scheduler = Scheduler(window=WINDOW, slots=2, clock=clock)
    for n in range(6):
        scheduler.add(f"job{n}", CLIENTS[n % 3], 300)
    scheduler.remove("job1")
    assert scheduler.position("job1") is None and len(scheduler) == 5
    taken = scheduler.take(1)
    assert taken is not None and taken.job_id == "job0"
    assert scheduler.position("job0") is None
    scheduler.requeue(taken)
    order = scheduler.order()
    assert order[0] == "job0" and len(scheduler) == 5
    assert [scheduler.position(job) for job in order] == list(range(5))
    with pytest.raises(ValueError):
        scheduler.remove("job1")
