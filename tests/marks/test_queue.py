"""The reading queue: its rules as a state machine against a model, and the CLI as typed."""

import datetime as dt
import json

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from marks.library import Library, MarksError
from marks.queue import ReadingQueue
from marks.store import Store

BOOKMARKS = 6


class Ticking:
    """A clock that moves one second per reading, so `queued_at` orders are real."""

    def __init__(self) -> None:
        self.moment = dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        self.moment += dt.timedelta(seconds=1)
        return self.moment


ids = st.integers(min_value=0, max_value=BOOKMARKS + 1)  # 0 and BOOKMARKS + 1 do not exist
levels = st.integers(min_value=-1, max_value=7)
percents = st.integers(min_value=-5, max_value=105)


class QueueRules(RuleBasedStateMachine):
    """Every operation either obeys the design's rules or fails and changes nothing."""

    @initialize()
    def open_library(self) -> None:
        self.store = Store(":memory:")
        clock = Ticking()
        library = Library(self.store, now=clock)
        for number in range(1, BOOKMARKS + 1):
            library.add(f"https://site{number}.example/")
        self.queue = ReadingQueue(self.store, now=clock)
        self.model: dict[int, dict] = {}  # id -> priority, progress, order, done
        self.order = 0

    def teardown(self) -> None:
        self.store.close()

    def _fails(self, call) -> bool:
        before = self.queue.items(include_completed=True)
        try:
            call()
        except MarksError:
            assert self.queue.items(include_completed=True) == before
            return True
        return False

    @rule(chosen=st.lists(ids, min_size=1, max_size=3), level=levels)
    def add(self, chosen, level) -> None:
        unique = list(dict.fromkeys(chosen))
        allowed = (
            1 <= level <= 5
            and all(1 <= i <= BOOKMARKS for i in unique)
            and not any(i in self.model and not self.model[i]["done"] for i in unique)
        )
        failed = self._fails(lambda: self.queue.add(chosen, priority=level))
        assert failed == (not allowed)
        if allowed:
            # One command stamps its items with one time: among them, the lower id comes first.
            self.order += 1
            for i in unique:
                self.model[i] = {"priority": level, "progress": 0, "order": self.order, "done": 0}

    @rule(chosen=st.lists(ids, min_size=1, max_size=3))
    def remove(self, chosen) -> None:
        allowed = all(i in self.model for i in chosen)
        assert self._fails(lambda: self.queue.remove(chosen)) == (not allowed)
        if allowed:
            for i in set(chosen):
                del self.model[i]

    @rule(target_id=ids, percent=percents)
    def progress(self, target_id, percent) -> None:
        allowed = target_id in self.model and 0 <= percent <= 100
        failed = self._fails(lambda: self.queue.set_progress(target_id, percent))
        assert failed == (not allowed)
        if allowed:
            entry = self.model[target_id]
            entry["progress"] = percent
            if percent < 100:
                entry["done"] = 0
            elif not entry["done"]:
                self.order += 1
                entry["done"] = self.order

    @rule(target_id=ids, level=levels)
    def priority(self, target_id, level) -> None:
        allowed = target_id in self.model and 1 <= level <= 5
        assert self._fails(lambda: self.queue.set_priority(target_id, level)) == (not allowed)
        if allowed:
            self.model[target_id]["priority"] = level

    @invariant()
    def matches_the_model(self) -> None:
        if not hasattr(self, "queue"):
            return
        open_ids = [i for i, e in self.model.items() if not e["done"]]
        expected = sorted(
            open_ids,
            key=lambda i: (
                self.model[i]["priority"],
                -self.model[i]["progress"],
                self.model[i]["order"],
                i,
            ),
        )
        assert [item.id for item in self.queue.items()] == expected
        following = self.queue.next()
        assert (following.id if following else None) == (expected[0] if expected else None)
        stats = self.queue.stats()
        assert stats.queued == len(open_ids)
        assert stats.completed == len(self.model) - len(open_ids)
        assert stats.in_progress == sum(1 for i in open_ids if self.model[i]["progress"] > 0)
        assert sum(stats.by_priority.values()) == len(open_ids)
        for item in self.queue.items(include_completed=True):
            assert (item.completed_at is not None) == (item.progress == 100)


QueueRules.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestQueueRules = QueueRules.TestCase


def _add_three(marks) -> None:
    for name in ("a", "b", "c"):
        assert (
            marks("bookmark", "add", f"https://{name}.example/", "--title", name.upper()).code == 0
        )


def test_queue_commands_as_a_user_types_them(marks):
    _add_three(marks)
    assert marks("queue", "add", "1", "2", "--priority", "2").code == 0
    assert marks("queue", "add", "3").code == 0
    assert marks("queue", "progress", "2", "40").code == 0

    following = marks("queue", "next")
    assert following.code == 0
    assert "https://b.example/" in following.out and "40" in following.out

    listed = json.loads(marks("--output", "json", "queue", "list").out)
    assert [(item["id"], item["priority"], item["progress"]) for item in listed] == [
        (2, 2, 40),
        (1, 2, 0),
        (3, 3, 0),
    ]

    assert marks("queue", "progress", "2", "100").code == 0
    assert [item["id"] for item in json.loads(marks("-o", "json", "queue", "list").out)] == [1, 3]
    everything = json.loads(marks("-o", "json", "queue", "list", "--all").out)
    assert [item["id"] for item in everything] == [1, 3, 2]
    assert everything[-1]["completed_at"] is not None

    stats = json.loads(marks("-o", "json", "queue", "stats").out)
    assert stats["queued"] == 2 and stats["completed"] == 1 and stats["in_progress"] == 0
    assert stats["by_priority"] == {"1": 0, "2": 1, "3": 1, "4": 0, "5": 0}
    assert stats["oldest"]["id"] == 1

    assert marks("queue", "remove", "1").code == 0
    assert [item["id"] for item in json.loads(marks("-o", "json", "queue", "list").out)] == [3]


def test_bad_values_and_ids_are_one_line_errors_that_change_nothing(marks):
    _add_three(marks)
    assert marks("queue", "add", "1").code == 0
    before = marks("-o", "json", "queue", "list", "--all").out
    for args, message in [
        (("queue", "progress", "1", "-5"), "progress must be 0 to 100"),
        (("queue", "progress", "1", "101"), "progress must be 0 to 100"),
        (("queue", "priority", "1", "0"), "priority must be 1 to 5"),
        (("queue", "priority", "1", "6"), "priority must be 1 to 5"),
        (("queue", "add", "2", "--priority", "9"), "priority must be 1 to 5"),
        (("queue", "add", "2", "1"), "bookmark 1 is already in the reading queue"),
        (("queue", "add", "2", "99"), "no bookmark with id 99"),
        (("queue", "remove", "1", "2"), "bookmark 2 is not in the reading queue"),
        (("queue", "progress", "42", "10"), "no bookmark with id 42"),
    ]:
        result = marks(*args)
        assert result.code == 1, args
        assert result.err.startswith(f"marks: {message}"), args
        assert len(result.err.strip().splitlines()) == 1, args
        assert marks("-o", "json", "queue", "list", "--all").out == before


def test_a_completed_item_can_be_queued_again(marks):
    _add_three(marks)
    marks("queue", "add", "1")
    marks("queue", "progress", "1", "100")
    assert marks("queue", "add", "1", "-p", "1").code == 0
    (item,) = json.loads(marks("-o", "json", "queue", "list").out)
    assert (item["id"], item["priority"], item["progress"], item["completed_at"]) == (1, 1, 0, None)


def test_empty_queue_says_so(marks):
    result = marks("queue", "next")
    assert result.code == 0 and result.out == "" and "empty" in result.err
    assert json.loads(marks("-o", "json", "queue", "next").out) is None
    assert json.loads(marks("-o", "json", "queue", "list").out) == []


def test_shell_queue_directory_lists_in_next_order(marks, db_path):
    store = Store(db_path)
    clock = Ticking()
    library = Library(store, now=clock)
    for name in ("a", "b", "c", "d"):
        library.add(f"https://{name}.example/")
    queue = ReadingQueue(store, now=clock)
    queue.add([2], priority=2)
    queue.add([1], priority=2)  # queued later than 2: after it, although its id is lower
    queue.add([4], priority=2)
    queue.set_progress(4, 10)  # in progress: before the others of its priority
    queue.add([3], priority=1)
    store.close()
    listing = marks.process("shell", "-c", "ls /queue").out
    order = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert order == ["3", "4", "2", "1"]
