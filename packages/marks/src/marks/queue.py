"""The reading queue: what to read next, and how far along each item is.

Rules (design, "Reading queue"): priority 1..5 (1 is highest, 3 by default), progress 0..100, and
progress 100 completes an item. Completed items stay in the table (listed with `--all`, counted in
the stats) until they are removed. `next` is the open item with the lowest priority number; among
those, the one already in progress with the most progress; then the oldest.

Every operation checks all of its input before it writes, inside one transaction, so a bad id or
value in a list changes nothing.
"""

import datetime as dt
from collections.abc import Callable, Iterable

from marks import clock
from marks.library import Invalid, MarksError, NotFound
from marks.store import Store
from marks.wire import QueueItem, QueueStats

PRIORITIES = range(1, 6)
DEFAULT_PRIORITY = 3
PROGRESS = range(0, 101)

# The `next` order; open items only. `queued_at` has second precision, so id breaks ties.
NEXT_ORDER = "q.priority, q.progress DESC, q.queued_at, q.bookmark_id"
_SELECT = (
    "SELECT q.bookmark_id, b.url, b.title, q.priority, q.progress, q.queued_at, q.completed_at "
    "FROM reading_queue q JOIN bookmarks b ON b.id = q.bookmark_id"
)


class AlreadyQueued(MarksError):
    pass


def _item(row: tuple) -> QueueItem:
    bookmark_id, url, title, priority, progress, queued_at, completed_at = row
    return QueueItem(
        id=bookmark_id,
        url=url,
        title=title,
        priority=priority,
        progress=progress,
        queued_at=clock.from_text(queued_at),
        completed_at=clock.from_text(completed_at),
    )


def check_priority(level: int) -> int:
    if level not in PRIORITIES:
        raise Invalid(f"priority must be 1 to 5 (1 is highest), not {level}")
    return level


def check_progress(percent: int) -> int:
    if percent not in PROGRESS:
        raise Invalid(f"progress must be 0 to 100 (percent), not {percent}")
    return percent


class ReadingQueue:
    def __init__(self, store: Store, now: Callable[[], dt.datetime] = clock.now) -> None:
        self.store = store
        self.now = now

    # --- reading ---------------------------------------------------------------------------------

    def get(self, bookmark_id: int) -> QueueItem:
        row = self.store.one(f"{_SELECT} WHERE q.bookmark_id = ?", (bookmark_id,))
        if row is None:
            self._must_exist(bookmark_id)
            raise NotFound(f"bookmark {bookmark_id} is not in the reading queue")
        return _item(row)

    def items(self, *, include_completed: bool = False) -> list[QueueItem]:
        """Open items in `next` order; with completed ones after them, latest completed first."""
        rows = list(
            self.store.execute(f"{_SELECT} WHERE q.completed_at IS NULL ORDER BY {NEXT_ORDER}")
        )
        if include_completed:
            rows += self.store.execute(
                f"{_SELECT} WHERE q.completed_at IS NOT NULL "
                "ORDER BY q.completed_at DESC, q.bookmark_id"
            )
        return [_item(row) for row in rows]

    def next(self) -> QueueItem | None:
        return self._first(NEXT_ORDER)

    def _first(self, order: str) -> QueueItem | None:
        # Order the queue table alone, then join one row: joining first sorts every open item.
        row = self.store.one(
            f"{_SELECT} WHERE q.bookmark_id = (SELECT q.bookmark_id FROM reading_queue q "
            f"WHERE q.completed_at IS NULL ORDER BY {order} LIMIT 1)"
        )
        return None if row is None else _item(row)

    def stats(self) -> QueueStats:
        counts = self.store.one(
            "SELECT count(*) FILTER (WHERE completed_at IS NULL), "
            "count(*) FILTER (WHERE completed_at IS NULL AND progress > 0), "
            "count(*) FILTER (WHERE completed_at IS NOT NULL) FROM reading_queue"
        )
        assert counts is not None  # an aggregate without GROUP BY always gives one row
        queued, in_progress, completed = counts
        by_priority = {level: 0 for level in PRIORITIES}
        for level, count in self.store.execute(
            "SELECT priority, count(*) FROM reading_queue WHERE completed_at IS NULL "
            "GROUP BY priority"
        ):
            by_priority[level] = count
        oldest = self._first("q.queued_at, q.bookmark_id")
        return QueueStats(
            queued=queued,
            in_progress=in_progress,
            completed=completed,
            by_priority=by_priority,
            oldest=oldest,
        )

    # --- writing ---------------------------------------------------------------------------------

    def add(self, ids: Iterable[int], priority: int = DEFAULT_PRIORITY) -> list[QueueItem]:
        """Queue bookmarks. A completed item is queued again from the start (read it again)."""
        check_priority(priority)
        chosen = list(dict.fromkeys(ids))
        with self.store.transaction():
            for bookmark_id in chosen:
                self._must_exist(bookmark_id)
                open_ = self.store.value(
                    "SELECT 1 FROM reading_queue WHERE bookmark_id = ? AND completed_at IS NULL",
                    (bookmark_id,),
                )
                if open_:
                    raise AlreadyQueued(f"bookmark {bookmark_id} is already in the reading queue")
            stamp = clock.to_text(self.now())
            self.store.db.executemany(
                "INSERT INTO reading_queue (bookmark_id, priority, progress, queued_at) "
                "VALUES (?, ?, 0, ?) ON CONFLICT (bookmark_id) DO UPDATE SET "
                "priority = excluded.priority, progress = 0, queued_at = excluded.queued_at, "
                "completed_at = NULL",
                [(bookmark_id, priority, stamp) for bookmark_id in chosen],
            )
        return [self.get(bookmark_id) for bookmark_id in chosen]

    def remove(self, ids: Iterable[int]) -> int:
        chosen = list(dict.fromkeys(ids))
        with self.store.transaction():
            for bookmark_id in chosen:
                self.get(bookmark_id)  # all must be queued, or nothing is removed
            self.store.db.executemany(
                "DELETE FROM reading_queue WHERE bookmark_id = ?", [(i,) for i in chosen]
            )
        return len(chosen)

    def set_progress(self, bookmark_id: int, percent: int) -> QueueItem:
        """Progress 100 completes the item; lowering it again reopens a completed one."""
        check_progress(percent)
        with self.store.transaction():
            current = self.get(bookmark_id)
            completed = (current.completed_at or self.now()) if percent == 100 else None
            self.store.execute(
                "UPDATE reading_queue SET progress = ?, completed_at = ? WHERE bookmark_id = ?",
                (percent, clock.to_text(completed), bookmark_id),
            )
        return self.get(bookmark_id)

    def set_priority(self, bookmark_id: int, level: int) -> QueueItem:
        check_priority(level)
        with self.store.transaction():
            self.get(bookmark_id)
            self.store.execute(
                "UPDATE reading_queue SET priority = ? WHERE bookmark_id = ?", (level, bookmark_id)
            )
        return self.get(bookmark_id)

    def _must_exist(self, bookmark_id: int) -> None:
        if self.store.value("SELECT 1 FROM bookmarks WHERE id = ?", (bookmark_id,)) is None:
            raise NotFound(f"no bookmark with id {bookmark_id}")
