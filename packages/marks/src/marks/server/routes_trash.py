"""`/trash` and `/undo`: deleted bookmarks, putting them back, undoing the last change."""

import msgspec

from marks import journal, trash
from marks.library import Library
from marks.server.endpoint import Call, Endpoint, Param
from marks.trash import Restored, TrashEntry, UndoReport


class RestoreOut(msgspec.Struct):
    restored: list[Restored]
    notes: list[str]  # came back under another id; its URL was bookmarked again meanwhile


class Removed(msgspec.Struct):
    removed: int


def entries(library: Library, call: Call) -> list[TrashEntry]:
    return trash.entries(library)


def restore(library: Library, call: Call) -> RestoreOut:
    restored = trash.restore(library, [call.path["id"]])
    return RestoreOut(restored, trash.notes(restored))


def empty(library: Library, call: Call) -> Removed:
    return Removed(trash.empty(library, call.query["older_than"]))


def undo(library: Library, call: Call) -> UndoReport:
    return trash.undo(library)


ENDPOINTS = [
    Endpoint("GET", "/trash", "Deleted bookmarks, newest first (kept `trash_days` days)",
             entries, response=list[TrashEntry]),
    Endpoint("DELETE", "/trash", "Forget deleted bookmarks for good (all, or older than N days)",
             empty, (Param("older_than", int, None, "only those deleted more than N days ago",
                           0, journal.MAX_DAYS),), response=Removed),
    Endpoint("POST", "/trash/{id:int}/restore",
             "Put a deleted bookmark back with its tags, queue entry, checks and pages",
             restore, response=RestoreOut, errors=(404,)),
    Endpoint("POST", "/undo", "Undo the last destructive change (delete, tag rename, merge or "
             "delete, bulk tags, dedupe, edit) and say what was put back",
             undo, response=UndoReport, errors=(404, 409)),
]  # fmt: skip
