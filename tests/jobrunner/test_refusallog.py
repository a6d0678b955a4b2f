"""Refusals are logged at most once per client and reason per window, and every refusal is
still accounted for: the first at once, the rest as one line with `repeated`."""

import itertools
import logging

from hypothesis import given
from hypothesis import strategies as st

from jobrunner.refusallog import RefusalLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def seen(self) -> list[tuple[str, str, int, int | None]]:
        return [
            (r.__dict__["client"], r.__dict__["reason"], r.__dict__["http_status"], repeated(r))
            for r in self.records
        ]


def repeated(record: logging.LogRecord) -> int | None:
    return record.__dict__["repeated"]  # the `extra=` fields are the record's attributes


def capture() -> Lines:
    lines = Lines()
    logger = logging.getLogger("jobrunner")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    return lines


def release(lines: Lines) -> None:
    logging.getLogger("jobrunner").removeHandler(lines)


def test_a_client_refused_in_a_loop_writes_one_line_a_window_and_the_count():
    clock, lines = Clock(), capture()
    try:
        refusals = RefusalLog(window=10, clock=clock)
        for _ in range(500):
            refusals("c-1", "rate_streams", 429)
            clock.now += 0.01
        assert lines.seen() == [("c-1", "rate_streams", 429, None)]
        clock.now += 10
        refusals("c-1", "rate_streams", 429)
        assert lines.seen()[1:] == [
            ("c-1", "rate_streams", 429, 499),
            ("c-1", "rate_streams", 429, None),
        ]
        assert lines.records[1].getMessage() == "request refused: rate_streams (429) x499"
    finally:
        release(lines)


def test_other_clients_and_reasons_each_get_their_line_and_a_closed_window_is_reported():
    clock, lines = Clock(), capture()
    try:
        refusals = RefusalLog(window=10, clock=clock)
        for _ in range(3):
            refusals("c-1", "rate_streams", 429)
            refusals("c-1", "too_large", 413)
            refusals("c-2", "rate_streams", 429)
        assert lines.seen() == [
            ("c-1", "rate_streams", 429, None),
            ("c-1", "too_large", 413, None),
            ("c-2", "rate_streams", 429, None),
        ]
        clock.now += 11  # c-1 and c-2 are not refused again: their counts come with anyone's
        refusals("c-3", "busy_open_files", 503)
        assert sorted(lines.seen()[3:], key=str) == sorted(
            [
                ("c-1", "rate_streams", 429, 2),
                ("c-1", "too_large", 413, 2),
                ("c-2", "rate_streams", 429, 2),
                ("c-3", "busy_open_files", 503, None),
            ],
            key=str,
        )
    finally:
        release(lines)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["c-1", "c-2", "c-3"]),
            st.sampled_from([("rate_streams", 429), ("too_large", 413)]),
            st.floats(min_value=0, max_value=7),
        ),
        max_size=200,
    )
)
def test_every_refusal_is_counted_once_and_each_key_opens_at_most_one_line_a_window(events):
    clock, lines = Clock(), capture()
    try:
        refusals = RefusalLog(window=10, clock=clock)
        opened: dict[tuple[str, str], list[float]] = {}
        for client, (reason, status), pause in events:
            clock.now += pause
            before = len(lines.records)
            refusals(client, reason, status)
            for record in lines.records[before:]:
                if repeated(record) is None:
                    key = (record.__dict__["client"], record.__dict__["reason"])
                    opened.setdefault(key, []).append(clock.now)
        clock.now += 20  # every window is closed: the next refusal sweeps them all
        refusals("c-9", "rate_streams", 429)
        counted = sum(1 if (n := repeated(r)) is None else n for r in lines.records)
        assert counted == len(events) + 1
        for times in opened.values():
            assert all(later - earlier >= 10 for earlier, later in itertools.pairwise(times))
    finally:
        release(lines)
