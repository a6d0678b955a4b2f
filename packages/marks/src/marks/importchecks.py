"""What an import checks in each record before it is written: the URL cleaned and keyed, the
title and description within their caps, the tags cleaned. None of it reads the database, so the
CLI runs it in the reader process beside the parsing (`marks.reader_process`) and sends the
checked `Entry`s; the importing process (`marks.importing`) counts, logs and writes them."""

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Protocol

import msgspec

from marks import tagnames, urls
from marks.wire import Bookmark

# The longest field an import keeps, in characters. Longer is not a bookmark but a file pasted
# into one (a 50 MB title was accepted, then every list carried it). A URL past 64 KiB is
# refused (cut, it would lead elsewhere): browsers' practical limit is about that, data: URLs
# aside. A title or a description past its cap is cut, a tag past its cap dropped; each such
# entry is counted as repaired and listed with the reason.
MAX_URL = 64 * 1024
MAX_TITLE = 4 * 1024
MAX_DESCRIPTION = 64 * 1024
MAX_TAG = 256
# Entries per cache of tags already cleaned or looked up. Imports repeat tags from one entry to the
# next (a folder's bookmarks), so a small cache has almost every hit a large one has; a full cache
# is emptied, never grown (50,000 tag lists held 20 MB at 100,000 bookmarks).
CACHE = 2048


def short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# What the checks made of an entry (`Entry.outcome`).
FINE, REPAIRED, INVALID = 0, 1, 2


class Entry(msgspec.Struct, array_like=True, gc=False):
    """A record after the checks (`Checker.check`), ready to be written: its URL cleaned, its
    title and description within their caps, its tags cleaned, its URL key and domain found.
    The reader process sends these (msgpack), so the checks run beside the writing. A repaired
    or invalid entry carries the line --verbose lists for it; the importing process counts and
    logs it where the entry comes in its file, as if it had checked it itself.

    The record's fields are its own, not a `Bookmark` inside: as an array, without the names of
    a Bookmark's fields (and a Record's reader notes), an entry is half the bytes to send, encode
    and decode."""

    url: str
    title: str
    description: str
    starred: bool
    archived: bool
    added: dt.datetime | None
    last_visited: dt.datetime | None
    visit_count: int
    reachable: bool | None
    last_checked: dt.datetime | None
    check_result: str | None
    archived_url: str | None
    archived_at: dt.datetime | None
    key: str
    domain: str
    tags: list[str]
    where: str
    outcome: int = FINE
    problem: str = ""  # for a repaired or invalid entry: what was done to it, and which it is

    def bookmark(self) -> Bookmark:
        """The entry as the library's merge rule takes it."""
        return Bookmark(
            url=self.url,
            title=self.title,
            description=self.description,
            tags=self.tags,
            starred=self.starred,
            archived=self.archived,
            added=self.added,
            last_visited=self.last_visited,
            visit_count=self.visit_count,
            reachable=self.reachable,
            last_checked=self.last_checked,
            check_result=self.check_result,
            archived_url=self.archived_url,
            archived_at=self.archived_at,
        )


def _entry(
    record: Bookmark,
    key: str,
    domain: str,
    tags: list[str],
    where: str,
    outcome: int = FINE,
    problem: str = "",
) -> Entry:
    return Entry(
        record.url,
        record.title,
        record.description,
        record.starred,
        record.archived,
        record.added,
        record.last_visited,
        record.visit_count,
        record.reachable,
        record.last_checked,
        record.check_result,
        record.archived_url,
        record.archived_at,
        key,
        domain,
        tags,
        where,
        outcome,
        problem,
    )


class _Described(Protocol):
    url: str
    title: str


def describe(record: _Described) -> str:
    url, title = short(record.url, 300), short(record.title, 120)
    if url and title:
        return f'{url} "{title}"'
    return url or (f'"{title}"' if title else "(no URL)")


def _capped(record: Bookmark, notes: list[str]) -> None:
    """Title and description cut to their caps, URL refused past its own (see MAX_URL)."""
    if len(record.url) > MAX_URL:
        raise urls.InvalidURL(f"URL of {len(record.url)} characters (at most {MAX_URL} kept)")
    if len(record.title) > MAX_TITLE:
        notes.append(f"title of {len(record.title)} characters cut to {MAX_TITLE}")
        record.title = record.title[:MAX_TITLE]
    if len(record.description) > MAX_DESCRIPTION:
        notes.append(
            f"description of {len(record.description)} characters cut to {MAX_DESCRIPTION}"
        )
        record.description = record.description[:MAX_DESCRIPTION]


class Checker:
    """The checks of an import's records (URL keys, caps, tag cleaning), with their caches. They
    read no database, so the reader process can run them (see `transfer.import_file`)."""

    def __init__(self) -> None:
        self.nocase = tagnames.nocase
        self.tag_cache: dict[str, tuple[str | None, str | None]] = {}
        self.tags_cache: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}

    def _tag(self, name: str) -> tuple[str | None, str | None]:
        """(normalised tag or None, note on a repair), cached: imports repeat their tags."""
        found = self.tag_cache.get(name)
        if found is not None:
            return found
        note = None
        if len(name) > MAX_TAG:  # cut, it might become another tag: dropped, and said
            return (
                None,
                f"tag of {len(name)} characters dropped (at most {MAX_TAG}): {name[:40]!r}…",
            )
        try:
            tag: str | None = tagnames.normalise(name)
        except tagnames.InvalidTag:
            repaired = " ".join(name.replace(",", ";").split())
            try:
                tag = tagnames.normalise(repaired)
                note = f"tag {name!r} read as {tag!r}"
            except tagnames.InvalidTag:
                tag, note = None, f"empty tag {name!r} dropped"
        if len(self.tag_cache) >= CACHE:
            self.tag_cache.clear()
        self.tag_cache[name] = (tag, note)
        return tag, note

    def clean_tags(self, names: Iterable[str], notes: list[str]) -> list[str]:
        names = tuple(names)
        cached = self.tags_cache.get(names)
        if cached is not None:  # imports repeat whole tag lists (every bookmark of a folder)
            notes.extend(cached[1])
            return list(cached[0])
        found: list[str] = []
        tags = self._clean(names, found)
        if len(self.tags_cache) >= CACHE:
            self.tags_cache.clear()
        self.tags_cache[names] = (tags, found)
        notes.extend(found)
        return list(tags)

    def _clean(self, names: Iterable[str], notes: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        for name in names:
            tag, note = self._tag(name)
            if note:
                notes.append(note)
            if tag is not None:
                seen.setdefault(self.nocase(tag), tag)
        return sorted(seen.values(), key=self.nocase)

    def check(self, record: Bookmark, number: int) -> Entry:
        where = getattr(record, "where", "") or f"entry {number}"
        notes = list(getattr(record, "notes", ()) or ())
        try:
            _capped(record, notes)
            fast = urls.plain(record.url)  # most URLs need no cleaning: one regex says so
            if fast is not None:
                record.url, key, domain = fast
                url_notes: list[str] = []
            else:
                url, url_notes = urls.clean(record.url)
                record.url, key, domain = urls.analyse(url)
        except urls.InvalidURL as error:
            record.url = short(record.url, 300)  # the line quotes it
            reason = (
                "; ".join([str(error), *notes]) if record.url else "; ".join(notes or ["no URL"])
            )
            problem = f"invalid ({reason}): {describe(record)}"
            return _entry(record, "", "", [], where, INVALID, problem)
        tags = self.clean_tags(record.tags, notes)
        notes += url_notes
        if notes:
            problem = f"repaired ({'; '.join(notes)}): {describe(record)}"
            return _entry(record, key, domain, tags, where, REPAIRED, problem)
        return _entry(record, key, domain, tags, where)

    def entries(self, records: Iterable[Bookmark]) -> Iterator[Entry]:
        """Each record checked, numbered from 1, once the reader has gone past it: the Netscape
        reader fills in a link's description (its `<DD>`, after the link) in the record it has
        yielded already, and is done with it only when it yields the next one (or ends).
        Checked as it was yielded, a description escaped its cap; written as it was yielded
        (the last entry of a batch), it was lost."""
        check = self.check
        number, held = 0, None
        for record in records:
            if held is not None:
                yield check(held, number)
            number, held = number + 1, record
        if held is not None:
            yield check(held, number)
