"""Running the virtual filesystem's queries: what is at a path, and what a directory lists.

`vfs.py` says what a path means without touching the database; this module asks the database,
so every listing is one or two indexed queries however large the library is.
"""

import datetime as dt
from collections.abc import Callable

import apsw

from marks import clock, limits, tagnames, vfs
from marks.library import Library, NotFound
from marks.rows import COLUMNS, to_bookmark
from marks.wire import Bookmark

DISPLAY_LIMIT = limits.LS_SHOWN
# Every domain once, in order: kept with its count in `domain_counts` (schema 14), whose key
# order is the domains' (finding them in the domain index took a seek per domain, 34 M
# instructions for the 5,513 of a million bookmarks; counting each read every entry).
DOMAINS = "WITH d (domain, bookmarks) AS (SELECT domain, bookmarks FROM domain_counts)"
# The top-level tag directories (`ls /tags`), in the order of their folded names, each spelled
# as the first of its tags (in the names' case-insensitive order) spells it: kept one row per
# directory in `tag_roots` (schema 14), so a million bookmarks' 12,000 directories are read as
# they are listed, not cut and sorted from 23,000 tag names.
TAG_ROOTS = "SELECT name FROM tag_roots ORDER BY root"


class Entry:
    """One name in a listing: a directory (with its count, if counted) or a bookmark.

    Plain classes here and in `Listing`: a dataclass costs start-up (see vfs.Selection)."""

    __slots__ = ("bookmark", "count", "is_dir", "name")

    def __init__(
        self, name: str, is_dir: bool, count: int | None = None, bookmark: Bookmark | None = None
    ) -> None:
        self.name = name
        self.is_dir = is_dir
        self.count = count
        self.bookmark = bookmark

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        mine = (self.name, self.is_dir, self.count, self.bookmark)
        return mine == (other.name, other.is_dir, other.count, other.bookmark)

    def __repr__(self) -> str:
        return f"Entry({self.name!r}, {self.is_dir!r}, {self.count!r}, {self.bookmark!r})"


class Listing:
    __slots__ = ("bookmarks_total", "entries")

    def __init__(self, entries: list[Entry], bookmarks_total: int) -> None:
        self.entries = entries
        self.bookmarks_total = bookmarks_total  # in the directory (entries may show fewer)


class Filesystem:
    def __init__(self, library: Library, now: Callable[[], dt.datetime] = clock.now) -> None:
        self.library = library
        self.now = now
        self.store = library.store

    # --- what is at a path -----------------------------------------------------------------------

    def locate(self, cwd: str, path: str) -> vfs.Location:
        """The location at `path`, checked against the library (PathError when it is not there)."""
        try:
            location = vfs.resolve(cwd, path, self.now())
            if location.tag is not None:
                return self._tag_or_bookmark(location)
            self._check(location)
        except vfs.PathError:
            if not path.isdigit():
                raise
            # A bare id that is nothing here is the bookmark itself: `cd 42` works anywhere.
            location = vfs.resolve("/", f"/bookmarks/{path}", self.now())
            self._check(location)
        return location

    def _check(self, location: vfs.Location) -> None:
        if location.tag is not None:
            self._tag_or_bookmark(location)
        elif location.is_bookmark:
            self._check_member(location)
        elif (
            location.path.startswith("/domains/")
            and location.selection is not None
            and not self.store.value(
                "SELECT 1 FROM bookmarks WHERE domain = ? LIMIT 1", location.selection.bindings
            )
        ):
            raise vfs.PathError(f"no such directory: {location.path}")

    def _tag_or_bookmark(self, location: vfs.Location) -> vfs.Location:
        from marks import search  # tag paths only: `ls /unread` need not load the search

        name = location.tag or ""
        if self.store.value(
            f"SELECT 1 FROM tags WHERE {search.tag_keys()} LIMIT 1",
            search.tag_bindings(name),
        ):
            return location
        parent, _, last = name.rpartition("/")
        if last.isdigit() and parent:
            bookmark = vfs.Location(
                location.path,
                bookmark_id=int(last),
                within=vfs.resolve("/", f"/tags/{parent}", self.now()).selection,
            )
            self._check_member(bookmark)
            return bookmark
        raise vfs.PathError(f"no such tag: {name}")

    def _check_member(self, location: vfs.Location) -> None:
        within = location.within or vfs.Selection("1")
        row = self.store.one(
            f"SELECT ({within.where}) FROM bookmarks WHERE id = ?",
            (*within.bindings, location.bookmark_id),
        )
        if row is None:
            raise vfs.PathError(f"no such bookmark {location.bookmark_id}")
        if not row[0]:
            raise vfs.PathError(
                f"bookmark {location.bookmark_id} is not in {vfs.parent(location.path)}"
            )

    # --- what a directory holds ------------------------------------------------------------------

    def _rows(
        self, columns: str, selection: vfs.Selection, limit: int | None = None
    ) -> apsw.Cursor:
        caps = [cap for cap in (limit, selection.limit) if cap is not None]
        return self.store.execute(
            f"SELECT {columns} FROM bookmarks WHERE {selection.where} "
            f"ORDER BY {selection.order} LIMIT ?",
            (*selection.bindings, min(caps) if caps else -1),
        )

    def bookmarks(self, selection: vfs.Selection, limit: int | None = None) -> list[Bookmark]:
        return [to_bookmark(row) for row in self._rows(COLUMNS, selection, limit)]

    def bookmarks_of(self, location: vfs.Location, *, below: bool = False) -> list[Bookmark]:
        """`ids()` as whole bookmarks, in one query (grep reads every field of each)."""
        if location.bookmark_id is not None:
            return [self.library.get(location.bookmark_id)]
        selection = location.below if below else location.selection
        return [] if selection is None else self.bookmarks(selection)

    def ids(self, location: vfs.Location, *, below: bool = False) -> list[int]:
        """The bookmarks a command acts on here: this one, the directory's own (what `ls`
        shows, for bulk commands), or with `below` everything under it (for find and grep)."""
        if location.bookmark_id is not None:
            return [location.bookmark_id]

        selection = location.below if below else location.selection
        if selection is None:
            return []
        return [row[0] for row in self._rows("id", selection)]

    def count(self, selection: vfs.Selection) -> int:
        sql, bindings = _counting(selection)
        return self.store.value(sql, bindings)

    def listing(
        self, location: vfs.Location, *, everything: bool = False, counts: bool = False
    ) -> Listing:
        entries = self._subdirs(location, counts) if location.subdirs else []
        total = 0
        if location.selection is not None:
            total = self.count(location.selection)
            shown = self.bookmarks(location.selection, None if everything else DISPLAY_LIMIT)
            entries += [Entry(str(b.id), False, bookmark=b) for b in shown]
        return Listing(entries, total)

    def names(self, location: vfs.Location) -> str | None:
        """What `ls` (without -l) prints for `/tags` and `/domains`, which hold subdirectories
        alone: each name with its `/`, one a line, read from SQLite as one text (12,000 tag
        directories at a million: an `Entry` and a formatted line each cost more than the
        query). None for any other directory: `listing()` gives its entries."""
        subdirs = location.subdirs
        if location.selection is not None or subdirs is None:
            return None
        # group_concat takes the rows in the order it is given them: here a scan of a table
        # stored in the order of its key (`tag_roots` by the folded name, `domain_counts` by the
        # domain). Asking it to sort (`ORDER BY` inside the call) costs a sort of what is
        # already sorted: 24 M instructions for the tags.
        if subdirs.kind == "tags" and subdirs.args == ("",):
            sql = "SELECT group_concat(name || '/', char(10)) FROM tag_roots"
        elif subdirs.kind == "domains":
            sql = "SELECT group_concat(domain || '/', char(10)) FROM domain_counts"
        else:
            return None
        return self.store.value(sql) or ""

    def _subdirs(self, location: vfs.Location, counts: bool) -> list[Entry]:
        subdirs = location.subdirs
        assert subdirs is not None
        if subdirs.kind == "static":
            numbers = self.root_counts() if location.path == "/" else {}
            return [Entry(name, True, numbers.get(name)) for name in subdirs.args]
        if subdirs.kind == "tags":
            return self._tag_dirs(subdirs.args[0], counts)
        if subdirs.kind == "domains":
            count = "bookmarks" if counts else "NULL"  # kept: only `ls -l` shows them
            return [
                Entry(domain, True, number)
                for domain, number in self.store.execute(
                    f"{DOMAINS} SELECT domain, {count} FROM d WHERE domain IS NOT NULL"
                )
            ]
        if subdirs.kind == "dates":  # the next date part of what lies below this directory
            column, prefix = subdirs.args
            start, width = (1, 4) if not prefix else (len(prefix) + 2, 2)
            below = location.below
            assert below is not None
            rows = self.store.execute(
                f"SELECT substr({column}, ?, ?) AS part, count(*) FROM bookmarks "
                f"WHERE {below.where} GROUP BY part ORDER BY part DESC",
                (start, width, *below.bindings),
            )
            return [Entry(part, True, count) for part, count in rows]
        raise ValueError(subdirs.kind)

    def _tag_dirs(self, prefix: str, counts: bool) -> list[Entry]:
        """The next tag segment below `prefix`, with the bookmarks under each when `counts`:
        one query whatever the number of tags (a count per tag would be one query each)."""
        if not prefix and not counts:
            return [Entry(name, True) for (name,) in self.store.execute(TAG_ROOTS)]
        depth = prefix.count("/") + 1 if prefix else 0
        where = "WHERE t.key LIKE ? ESCAPE '\\'" if prefix else ""
        bindings: tuple[str, ...] = ()
        if prefix:
            from marks import search

            bindings = (search.like_prefix(tagnames.key(prefix)),)
        if counts:
            rows = self.store.execute(
                f"SELECT t.name, bt.bookmark_id FROM tags t "
                f"JOIN bookmark_tags bt ON bt.tag_id = t.id {where}",
                bindings,
            )
        else:
            rows = self.store.execute(f"SELECT t.name, NULL FROM tags t {where}", bindings)
        children: dict[str, str] = {}
        members: dict[str, set[int]] = {}
        for name, bookmark_id in rows:
            segment = name.split("/")[depth]
            folded = segment.casefold()
            children.setdefault(folded, segment)
            if bookmark_id is not None:
                members.setdefault(folded, set()).add(bookmark_id)
        order = sorted(children)  # by the folded name: each key is its name's casefold
        return [
            Entry(children[folded], True, len(members.get(folded, ())) if counts else None)
            for folded in order
        ]

    def root_counts(self) -> dict[str, int]:
        """Every top-level count in one pass over the bookmarks, from the same filters the
        directories use (so a count and its listing can never disagree)."""
        counted = {name: selection for name, selection in vfs.COLLECTIONS.items()}
        recent = vfs.resolve("/", "/recent", self.now()).selection
        assert recent is not None  # /recent is a collection: it always has a selection
        counted["recent"] = recent

        # One statement of one count each, so each reads its own index (schema 11): one pass
        # over every bookmark computing all the sums at once read a million rows.
        parts = [_counting(selection) for selection in counted.values()]
        row = self.store.one(
            "SELECT " + ", ".join(f"({sql})" for sql, _ in parts),
            [value for _, bindings in parts for value in bindings],
        )
        assert row is not None  # scalar subqueries: always one row
        numbers = dict(zip(counted, row, strict=True))
        numbers["tags"] = self.store.value("SELECT count(*) FROM tags")
        numbers["domains"] = self.store.value(
            f"{DOMAINS} SELECT count(*) FROM d WHERE domain IS NOT NULL"
        )
        return numbers

    # --- where a bookmark appears ----------------------------------------------------------------

    def paths_of(self, bookmark_id: int) -> list[str]:
        try:
            bookmark = self.library.get(bookmark_id)
        except NotFound as error:
            raise vfs.PathError(str(error)) from None
        paths = [f"/bookmarks/{bookmark.id}"]
        paths += [f"/tags/{tag}/{bookmark.id}" for tag in bookmark.tags]
        host = self.store.value("SELECT domain FROM bookmarks WHERE id = ?", (bookmark.id,))
        if host:
            paths.append(f"/domains/{host}/{bookmark.id}")
        for name, selection in vfs.COLLECTIONS.items():
            if name == "bookmarks":
                continue
            if (
                bookmark.id in self.ids(vfs.Location(f"/{name}", selection))
                if selection.limit
                else self.store.value(
                    f"SELECT 1 FROM bookmarks WHERE id = ? AND ({selection.where})", (bookmark.id,)
                )
            ):
                paths.append(f"/{name}/{bookmark.id}")
        if bookmark.added:
            paths.append(f"/by-date/added/{bookmark.added:%Y/%m/%d}/{bookmark.id}")
        if bookmark.last_visited:
            paths.append(f"/by-date/visited/{bookmark.last_visited:%Y/%m/%d}/{bookmark.id}")
        return paths


def _counting(selection: vfs.Selection) -> tuple[str, tuple]:
    """The statement counting a directory's bookmarks: all of them without a WHERE (SQLite
    counts a table's pages then, not its rows), all less the others when those are fewer
    (/unread), and a capped directory (/popular) only up to its cap rather than every bookmark
    that would qualify. A count the schema keeps is read (/unread, /recent)."""
    if selection.kept:
        return selection.kept, ()
    if selection.where == "1" and not selection.limit:
        return "SELECT count(*) FROM bookmarks", ()
    if selection.others and not selection.limit:
        return (
            "SELECT (SELECT count(*) FROM bookmarks) - "
            f"(SELECT count(*) FROM bookmarks WHERE {selection.others})",
            (),
        )
    if selection.limit:
        return (
            f"SELECT count(*) FROM (SELECT 1 FROM bookmarks WHERE {selection.where} LIMIT ?)",
            (*selection.bindings, selection.limit),
        )
    return f"SELECT count(*) FROM bookmarks WHERE {selection.where}", selection.bindings
