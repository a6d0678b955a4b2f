"""`/queue`: the reading queue: list, add, next, stats, and per item progress, priority, removal."""

import msgspec

from marks.library import Invalid, Library
from marks.queue import DEFAULT_PRIORITY, ReadingQueue
from marks.server.endpoint import Call, Endpoint, Param
from marks.wire import QueueItem, QueueStats


class QueueAdd(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    ids: list[int]
    priority: int = DEFAULT_PRIORITY  # 1 (highest) .. 5


class QueueChange(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Only what is sent changes: progress 0..100 (100 completes the item), priority 1..5."""

    progress: int | msgspec.UnsetType = msgspec.UNSET
    priority: int | msgspec.UnsetType = msgspec.UNSET


def _queue(library: Library) -> ReadingQueue:
    return ReadingQueue(library.store, now=library.now)


def items(library: Library, call: Call) -> list[QueueItem]:
    return _queue(library).items(include_completed=call.query["all"])


def add(library: Library, call: Call) -> list[QueueItem]:
    body: QueueAdd = call.body
    if not body.ids:
        raise Invalid("give at least one bookmark id")
    return _queue(library).add(body.ids, priority=body.priority)


def next_item(library: Library, call: Call) -> QueueItem | None:
    return _queue(library).next()


def stats(library: Library, call: Call) -> QueueStats:
    return _queue(library).stats()


def change(library: Library, call: Call) -> QueueItem:
    body: QueueChange = call.body
    queue, bookmark_id = _queue(library), call.path["id"]
    with library.store.transaction():  # both or neither
        item = queue.get(bookmark_id)
        if body.priority is not msgspec.UNSET:
            item = queue.set_priority(bookmark_id, body.priority)
        if body.progress is not msgspec.UNSET:
            item = queue.set_progress(bookmark_id, body.progress)
    return item


def remove(library: Library, call: Call) -> None:
    _queue(library).remove([call.path["id"]])


ONE = "/queue/{id:int}"
ENDPOINTS = [
    Endpoint("GET", "/queue", "The reading queue in reading order (the next item first)", items,
             (Param("all", bool, False, "include completed items"),), response=list[QueueItem]),
    Endpoint("POST", "/queue", "Queue bookmarks (409 if one is queued already)", add,
             body=QueueAdd, status=201, response=list[QueueItem], errors=(404, 409, 422)),
    Endpoint("GET", "/queue/next", "The item to read next (null when the queue is empty)",
             next_item, response=QueueItem | None),
    Endpoint("GET", "/queue/stats", "Queued, in progress, completed, by priority, oldest", stats,
             response=QueueStats),
    Endpoint("PATCH", ONE, "Set an item's progress (100 completes it) or priority", change,
             body=QueueChange, response=QueueItem, errors=(404, 422)),
    Endpoint("DELETE", ONE, "Take a bookmark out of the queue", remove, status=204,
             errors=(404,)),
]  # fmt: skip
