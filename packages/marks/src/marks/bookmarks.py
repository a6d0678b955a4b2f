"""Bookmarks themselves, the first half of the service layer (`marks.library`): reading them,
adding, changing, deleting and visiting them, each one transaction, and the undo journal's hooks.

`Library` (in `marks.library`) adds the tags and the import and export rules on top; front ends
use `Library`, never this class alone. Split out so that each module holds one part of the rules.
"""

import contextlib
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from marks import clock, formats, limits, tagnames
from marks.exceptions import Duplicate, Invalid, NotFound
from marks.rows import COLUMNS
from marks.rows import to_bookmark as row_to_bookmark
from marks.store import NO_FTS5, Store
from marks.wire import Bookmark

if TYPE_CHECKING:
    from marks import search
    from marks.plugins import Plugins

# `marks.search` (the query language with it), `marks.urls` and the undo journal (`marks.journal`,
# with the trash's rows) are imported by the methods that use them: `bookmark list` and the
# shell's `ls` load none of them (start-up is most of their time).


SORTS = {  # name -> (order, reversed order); unvisited bookmarks come last by default
    "added": ("added DESC, id DESC", "added, id"),
    "visited": (
        "last_visited IS NULL, last_visited DESC, id DESC",
        "last_visited IS NOT NULL, last_visited, id",
    ),
    "title": ("title COLLATE NOCASE, id", "title COLLATE NOCASE DESC, id DESC"),
    "url": ("url, id", "url DESC, id DESC"),
    "visits": ("visit_count DESC, id DESC", "visit_count, id"),
    "id": ("id", "id DESC"),
}
EDITABLE = {"url", "title", "description", "tags", "starred", "archived"}
FULL_TEXT_MISSING = f"full-text search unavailable ({NO_FTS5}): substring search"


# What an importer found: a Bookmark not stored yet (id 0), before the library's rules apply.
Record = formats.Record


def clean_tags(names: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for name in names:
        try:
            tag = tagnames.normalise(name)
        except tagnames.InvalidTag as error:
            raise Invalid(str(error)) from None
        seen.setdefault(tagnames.key(tag), tag)
    if len(seen) > limits.TAGS_PER_BOOKMARK:
        raise Invalid(f"{len(seen)} tags: a bookmark has at most {limits.TAGS_PER_BOOKMARK}")
    return sorted(seen.values(), key=tagnames.nocase)


class Bookmarks:
    """A library's bookmarks (see the module's docstring); `Library` is the whole service."""

    def __init__(
        self,
        store: Store,
        now: Callable[[], dt.datetime] = clock.now,
        plugins: "Plugins | None" = None,
        trash_days: int = limits.TRASH_DAYS,
    ) -> None:
        self.store = store
        self.now = now
        self.plugins = plugins  # marks.plugins.Plugins; None: no plugin is ever called
        self.trash_days = trash_days  # config `trash_days`: deleted bookmarks kept this long
        self._tag_ids: dict[str, int] = {}
        self._step: int | None = None  # the undo step the running change records into

    # --- the undo journal ------------------------------------------------------------------------

    @contextlib.contextmanager
    def undoable(self, action: str) -> Iterator[int]:
        """One destructive change: a transaction and an undo step recorded in it (the change
        says what it did with `journal.describe`). Nested changes join the outer step."""
        from marks import journal

        if self._step is not None:
            yield self._step
            return
        with self.store.transaction():
            self._step = journal.begin(self.store, action, self.now())
            try:
                yield self._step
            finally:
                self._step = None

    def before(self, ids: Iterable[int], fields: Sequence[str] = (), tags: bool = True) -> None:
        """Keep what the running change is about to overwrite on these bookmarks."""
        from marks import journal

        assert self._step is not None, "inside undoable()"
        journal.save(self.store, self._step, ids, fields, tags)

    def said(self, summary: str) -> None:
        from marks import journal

        if self._step is not None:
            journal.describe(self.store, self._step, summary)

    def purge_trash(self) -> int:
        """Forget what has been in the trash longer than `trash_days` (cheap when nothing has)."""
        from marks import journal

        return journal.purge(self.store, self.now() - dt.timedelta(days=self.trash_days))

    # --- reading ---------------------------------------------------------------------------------

    def get(self, bookmark_id: int) -> Bookmark:
        row = self.store.one(f"SELECT {COLUMNS} FROM bookmarks WHERE id = ?", (bookmark_id,))
        if row is None:
            raise NotFound(f"no such bookmark {bookmark_id}")
        return row_to_bookmark(row)

    def get_many(self, ids: Iterable[int]) -> list[Bookmark]:
        """The bookmarks in the order asked, in one query; NotFound names the first missing."""
        ids = list(ids)
        found: dict[int, Bookmark] = {}
        for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit, with room
            chunk = ids[start : start + 500]
            rows = self.store.execute(
                f"SELECT {COLUMNS} FROM bookmarks WHERE id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            found.update((b.id, b) for b in map(row_to_bookmark, rows))
        for bookmark_id in ids:
            if bookmark_id not in found:
                raise NotFound(f"no such bookmark {bookmark_id}")
        return [found[bookmark_id] for bookmark_id in ids]

    def find_by_url(self, url: str) -> Bookmark | None:
        from marks import urls

        row = self.store.one(f"SELECT {COLUMNS} FROM bookmarks WHERE url_key = ?", (urls.key(url),))
        return None if row is None else row_to_bookmark(row)

    def count(self) -> int:
        return self.store.value("SELECT count(*) FROM bookmarks")

    def list_bookmarks(
        self,
        *,
        sort: str = "added",
        reverse: bool = False,
        limit: int | None = None,
        offset: int = 0,
        tag: str | None = None,
        tags: Iterable[str] = (),
        starred: bool | None = None,
        where: str = "",
        bindings: Sequence[Any] = (),
    ) -> list[Bookmark]:
        """Bookmarks in an order, optionally filtered: with every one of `tags` (or `tag`, each
        with its descendants), starred or not; `where` comes from a trusted compiler."""
        if sort not in SORTS:
            raise Invalid(f"unknown sort {sort!r} (use {', '.join(SORTS)})")
        clauses, params = [where] if where else [], list(bindings)
        names = [*tags, *([tag] if tag is not None else [])]
        if names:
            from marks import search

            for name in names:
                clauses.append(search.tag_clause())
                params += search.tag_bindings(name)
        if starred is not None:
            clauses.append("starred = ?")
            params.append(int(starred))
        order = SORTS[sort][1 if reverse else 0]
        sql = f"SELECT {COLUMNS} FROM bookmarks"
        if clauses:
            sql += " WHERE " + " AND ".join(f"({c})" for c in clauses)
        sql += f" ORDER BY {order} LIMIT ? OFFSET ?"
        params += [-1 if limit is None else limit, offset]
        return [row_to_bookmark(row) for row in self.store.execute(sql, params)]

    def with_tags(self, names: Iterable[str], *, any_tag: bool = False) -> list[Bookmark]:
        """Bookmarks with all (or any) of the tags, descendants included."""
        from marks import search

        names = list(names)
        joiner = " OR " if any_tag else " AND "
        where = joiner.join(f"({search.tag_clause()})" for _ in names)
        bindings = [value for name in names for value in search.tag_bindings(name)]
        return self.list_bookmarks(where=where, bindings=bindings)

    def tag_names(self, prefix: str = "", limit: int = limits.COMPLETIONS) -> list[str]:
        """Tags starting with `prefix` (for completion)."""
        from marks import search

        rows = self.store.execute(
            "SELECT name FROM tags WHERE key LIKE ? ESCAPE '\\' ORDER BY key LIMIT ?",
            (search.like_escape(prefix.casefold()) + "%", limit),
        )
        return [name for (name,) in rows]

    def has_tag(self, name: str) -> bool:
        """True when a tag of this name (in any case) is on some bookmark."""
        return bool(self.store.value("SELECT 1 FROM tags WHERE key = ?", (tagnames.key(name),)))

    def untagged_count(self) -> int:
        return self.store.value("SELECT count(*) FROM bookmarks WHERE tags = ''")

    def iterate(self) -> Iterator[Bookmark]:
        """Every bookmark in id order, streamed (for exports)."""
        for row in self.store.execute(f"SELECT {COLUMNS} FROM bookmarks ORDER BY id"):
            yield row_to_bookmark(row)

    def corpus(self) -> Iterator[str]:
        """Each bookmark's words: title, description and stored page text (for tag suggesters)."""
        for (text,) in self.store.execute(
            "SELECT b.title || ' ' || b.description || ' ' || coalesce(c.text, '') "
            "FROM bookmarks b LEFT JOIN page_content c ON c.bookmark_id = b.id"
        ):
            yield text

    def search(
        self, text: str, *, fts: bool = True, limit: int | None = limits.SEARCH_RESULTS
    ) -> "search.SearchResults":
        """Hits, best first. Full text on a SQLite without FTS5 is the same query as substring
        matches, and the results say so once (`fallback`) for the front end to show."""
        from marks import search

        if self.plugins is not None:
            text = self.plugins.chain("search_enhancer", text)
        try:
            if not fts:
                return search.SearchResults(search.substring(self.store, text, limit))
            if self.store.full_text():
                hits = search.full_text(self.store, text, limit)
                return search.SearchResults(hits, full_text=True)
            hits = search.query_substring(self.store, text, limit)
            return search.SearchResults(hits, fallback=FULL_TEXT_MISSING)
        except search.QueryError as error:
            raise Invalid(str(error)) from None

    # --- writing bookmarks -----------------------------------------------------------------------

    def add(
        self,
        url: str,
        *,
        title: str = "",
        description: str = "",
        tags: Iterable[str] = (),
        starred: bool = False,
        archived: bool = False,
    ) -> Bookmark:
        from marks import urls

        try:
            url = urls.check(urls.clean(url)[0])  # spaces encoded, as browsers do
        except urls.InvalidURL as error:
            raise Invalid(str(error)) from None
        with self.store.transaction():
            existing = self.store.value(
                "SELECT id FROM bookmarks WHERE url_key = ?", (urls.key(url),)
            )
            if existing is not None:
                raise Duplicate(existing, url)
            record = Record(
                url=url,
                title=title,
                description=description,
                tags=list(tags),
                starred=starred,
                archived=archived,
            )
            self._enrich(record)
            bookmark_id = self._insert(
                record, clean_tags(record.tags), urls.key(url), urls.domain(url)
            )
        added = self.get(bookmark_id)
        self._fire("on_bookmark_added", added)
        return added

    def _enrich(self, record: Record) -> None:
        """bookmark_enricher plugins fill what the user left empty and may add tags."""
        if self.plugins is None:
            return
        for _name, changes in self.plugins.apply("bookmark_enricher", record):
            if not isinstance(changes, dict):
                continue
            for field in ("title", "description"):
                value = changes.get(field)
                if isinstance(value, str) and value.strip() and not getattr(record, field):
                    setattr(record, field, value.strip())
            extra = changes.get("tags")
            if isinstance(extra, list | tuple):
                record.tags = [*record.tags, *(t for t in extra if isinstance(t, str))]

    def _fire(self, hook: str, *args: Any) -> None:
        # After the commit: a plugin sees what is stored, and its failure cannot undo it.
        if self.plugins is not None:
            self.plugins.fire(hook, *args)

    def _insert(self, record: Record, tags: list[str], key: str, domain: str) -> int:
        from marks import journal

        self.store.execute(
            "INSERT INTO bookmarks (id, url, url_key, title, description, tags, domain, starred, "
            "archived, added, last_visited, visit_count, reachable, last_checked, check_result) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                journal.next_id(self.store),  # never an id the trash will want back
                record.url,
                key,
                record.title.strip(),
                record.description.strip(),
                "\n".join(tags),
                domain,
                int(record.starred),
                int(record.archived),
                clock.to_text(record.added or self.now()),
                clock.to_text(record.last_visited),
                max(0, record.visit_count),
                None if record.reachable is None else int(record.reachable),
                clock.to_text(record.last_checked),
                record.check_result,
            ),
        )
        bookmark_id = self.store.db.last_insert_rowid()
        self._link(bookmark_id, tags)
        return bookmark_id

    def _tag_id(self, name: str) -> int:
        """The tag's id, created on first use; a name that differs only in case (in any script)
        is the same tag, and keeps the spelling it was first stored with."""
        folded = tagnames.key(name)
        if folded not in self._tag_ids:
            self.store.execute("INSERT OR IGNORE INTO tags (name) VALUES (?)", (name,))
            self._tag_ids[folded] = self.store.value("SELECT id FROM tags WHERE key = ?", (folded,))
        return self._tag_ids[folded]

    def _link(self, bookmark_id: int, tags: Iterable[str]) -> None:
        self.store.db.executemany(
            "INSERT OR IGNORE INTO bookmark_tags (bookmark_id, tag_id) VALUES (?, ?)",
            [(bookmark_id, self._tag_id(tag)) for tag in tags],
        )

    def _drop_orphan_tags(self) -> None:
        """Tags no bookmark has any more go (after a delete, a change of tags, an undo)."""
        self.store.execute("DELETE FROM tags WHERE id NOT IN (SELECT tag_id FROM bookmark_tags)")
        self._tag_ids.clear()

    def update(self, bookmark_id: int, **changes: Any) -> Bookmark:
        from marks import urls

        unknown = set(changes) - EDITABLE
        if unknown:
            raise Invalid(f"cannot change {', '.join(sorted(unknown))}")
        with self.store.transaction():
            current = self.get(bookmark_id)
            columns: dict[str, Any] = {}
            if "url" in changes:
                try:
                    url = urls.check(urls.clean(changes["url"])[0])
                except urls.InvalidURL as error:
                    raise Invalid(str(error)) from None
                clash = self.store.value(
                    "SELECT id FROM bookmarks WHERE url_key = ? AND id != ?",
                    (urls.key(url), bookmark_id),
                )
                if clash is not None:
                    raise Duplicate(clash, url)
                columns |= {"url": url, "url_key": urls.key(url), "domain": urls.domain(url)}
            for name in ("title", "description"):
                if name in changes:
                    columns[name] = str(changes[name]).strip()
            for name in ("starred", "archived"):
                if name in changes:
                    columns[name] = int(bool(changes[name]))
            new_tags = clean_tags(changes["tags"]) if "tags" in changes else None
            lost = [  # text a change overwrites: undo puts it back (a star is one click back)
                name
                for name in ("url", "title", "description")
                if name in columns and columns[name] != getattr(current, name)
            ] + (["tags"] if new_tags is not None and new_tags != current.tags else [])
            with self.undoable("update") if lost else contextlib.nullcontext():
                if lost:
                    fields = [*columns, *(["url_key", "domain"] if "url" in columns else [])]
                    self.before([bookmark_id], sorted(set(fields)), tags="tags" in lost)
                    self.said(f"changed the {', '.join(lost)} of bookmark {bookmark_id}")
                if columns:
                    assignments = ", ".join(f"{name} = ?" for name in columns)
                    self.store.execute(
                        f"UPDATE bookmarks SET {assignments} WHERE id = ?",
                        (*columns.values(), bookmark_id),
                    )
                if new_tags is not None:
                    self._set_tags(current.id, new_tags)
        updated = self.get(bookmark_id)
        self._fire("on_bookmark_updated", updated)
        return updated

    def _set_tags(self, bookmark_id: int, tags: list[str]) -> None:
        self.store.execute("DELETE FROM bookmark_tags WHERE bookmark_id = ?", (bookmark_id,))
        self._link(bookmark_id, tags)
        self._drop_orphan_tags()

    def delete(self, ids: Iterable[int]) -> int:
        """Move bookmarks to the trash with everything that hangs on them (`marks undo` or
        `trash restore` brings them back; `trash_days` later they are gone)."""
        from marks import journal

        ids = list(dict.fromkeys(ids))
        with self.store.transaction():
            self.purge_trash()  # before the step begins: a purge forgets steps with no rows
            with self.undoable("delete") as step:
                gone = self.get_many(ids)  # all exist, or none goes
                journal.move(self.store, ids, self.now(), step)
                self._drop_orphan_tags()
                names = ", ".join(f"{b.id} ({b.title or b.url})" for b in gone[:3])
                more = f" and {len(gone) - 3} more" if len(gone) > 3 else ""
                self.said(f"deleted {len(gone)} bookmark(s): {names}{more}")
        for bookmark in gone:
            self._fire("on_bookmark_deleted", bookmark)
        return len(ids)

    def visit(self, bookmark_id: int) -> Bookmark:
        with self.store.transaction():
            self.get(bookmark_id)
            self.store.execute(
                "UPDATE bookmarks SET visit_count = visit_count + 1, last_visited = ? WHERE id = ?",
                (clock.to_text(self.now()), bookmark_id),
            )
        return self.get(bookmark_id)
