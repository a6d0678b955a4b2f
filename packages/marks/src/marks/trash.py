"""The trash and undo, as every front end asks for them: list, restore and empty the trash,
undo the last destructive change. Storage and the rules of putting rows back are
`marks.journal`'s; this module is the one service the CLI, the shell and the server call."""

import datetime as dt
from collections.abc import Iterable

import msgspec

from marks import journal
from marks.exceptions import Invalid, NotFound
from marks.journal import Restored, TrashEntry
from marks.library import Library

__all__ = ["Restored", "TrashEntry", "UndoReport", "empty", "entries", "restore", "undo"]


class UndoReport(msgspec.Struct):
    action: str  # delete, update, tag add, tag remove, tag rename, tag delete, bulk tags, dedupe
    summary: str  # what the change did, as it said then
    at: dt.datetime | None  # when it was done
    restored: list[Restored]  # bookmarks back from the trash
    changed: int  # bookmarks whose fields or tags were put back
    remaining: int  # changes the journal still remembers (`marks undo` again)
    message: str = ""  # the one line every front end shows
    notes: list[str] = []  # per bookmark: came back under another id, URL bookmarked again


def entries(library: Library) -> list[TrashEntry]:
    """What is in the trash, newest first (entries past `trash_days` are forgotten first)."""
    with library.store.transaction():
        library.purge_trash()
    return journal.entries(library.store)


def restore(library: Library, ids: Iterable[int]) -> list[Restored]:
    """Put bookmarks back from the trash, by the ids they had; all or none."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise Invalid("give the ids of bookmarks in the trash (`marks trash list`)")
    store = library.store
    with store.transaction():
        library.purge_trash()
        for bookmark_id in wanted:
            if store.one("SELECT 1 FROM trash WHERE bookmark_id = ?", (bookmark_id,)) is None:
                raise NotFound(f"bookmark {bookmark_id} is not in the trash")
        restored: list[Restored] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            restored += journal.restore(
                store, f"bookmark_id IN ({','.join('?' * len(chunk))})", chunk
            )
        journal.tidy(store)
        library.tags_changed()
    return restored


def empty(library: Library, older_than_days: int | None = None) -> int:
    """Forget trash entries for good: all, or those deleted more than N days ago."""
    before = None
    if older_than_days is not None:
        if not 0 <= older_than_days <= journal.MAX_DAYS:
            raise Invalid(f"--older-than takes a number of days from 0 to {journal.MAX_DAYS}")
        before = library.now() - dt.timedelta(days=older_than_days)
    with library.store.transaction():
        return journal.purge(library.store, before)


def undo(library: Library) -> UndoReport:
    """Reverse the last destructive change the journal remembers, in one transaction."""
    store = library.store
    with store.transaction():
        library.purge_trash()
        step = journal.last(store)
        if step is None:
            raise NotFound(f"nothing to undo (the last {journal.UNDO_STEPS} changes are kept)")
        restored = journal.restore(store, "step = ?", (step.id,))
        changed = journal.put_back(store, step.id)
        library.tags_changed()
        journal.forget(store, step.id)
        remaining = store.value("SELECT count(*) FROM undo_steps")
    report = UndoReport(step.action, step.summary, step.at, restored, changed, remaining)
    done = []
    if restored:
        done.append(f"restored {len(restored)} bookmark(s) from the trash")
    if changed:
        done.append(f"put back the fields or tags of {changed} bookmark(s)")
    report.message = (
        f"undid {step.action} ({step.summary}): {'; '.join(done) or 'nothing was left to put back'}"
    )
    report.notes = notes(restored)
    return report


def notes(restored: list[Restored]) -> list[str]:
    return [note for note in map(describe, restored) if note]


def describe(restored: Restored) -> str | None:
    """What a person must know about one restored bookmark, or None."""
    notes = []
    if restored.id != restored.was:
        notes.append(f"bookmark {restored.was} came back as {restored.id} (its id was taken)")
    if restored.same_as is not None:
        notes.append(
            f"bookmark {restored.id} ({restored.url}) was bookmarked again meanwhile as "
            f"{restored.same_as}: both are kept (`marks db dedupe` merges them)"
        )
    return "; ".join(notes) or None
