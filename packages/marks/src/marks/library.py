"""The service layer: every rule about bookmarks and tags, each operation one transaction.

Front ends (CLI, shell, REST server) call this and nothing below it. Errors are `MarksError`
subclasses whose message is one line a person can act on.
"""

import contextlib
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from marks import clock, formats, journal, limits, tagnames
from marks.exceptions import Duplicate, Invalid, MarksError, NotFound
from marks.rows import COLUMNS
from marks.rows import to_bookmark as row_to_bookmark
from marks.store import NO_FTS5, Store
from marks.wire import Bookmark, TagCount, TagStats, TagUse

__all__ = ["Duplicate", "Invalid", "Library", "MarksError", "NotFound", "Record"]

if TYPE_CHECKING:
    from marks import search
    from marks.plugins import Plugins

# `marks.search` (the query language with it) and `marks.urls` are imported by the methods that
# use them: `bookmark list` and the shell's `ls` load neither (start-up is most of their time).


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


def _clean_tags(names: Iterable[str]) -> list[str]:
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


class Library:
    def __init__(
        self,
        store: Store,
        now: Callable[[], dt.datetime] = clock.now,
        plugins: "Plugins | None" = None,
        trash_days: int = journal.TRASH_DAYS,
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
        assert self._step is not None, "inside undoable()"
        journal.save(self.store, self._step, ids, fields, tags)

    def said(self, summary: str) -> None:
        if self._step is not None:
            journal.describe(self.store, self._step, summary)

    def purge_trash(self) -> int:
        """Forget what has been in the trash longer than `trash_days` (cheap when nothing has)."""
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
                record, _clean_tags(record.tags), urls.key(url), urls.domain(url)
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
            new_tags = _clean_tags(changes["tags"]) if "tags" in changes else None
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

    # --- tags ------------------------------------------------------------------------------------

    def tags_changed(self) -> None:
        """Tags came back or went below the library (a restore, an undo): orphans go, and the
        cached tag ids are forgotten."""
        self._drop_orphan_tags()

    def _drop_orphan_tags(self) -> None:
        self.store.execute("DELETE FROM tags WHERE id NOT IN (SELECT tag_id FROM bookmark_tags)")
        self._tag_ids.clear()

    def tag_counts(self) -> list[TagCount]:
        """Every tag and every implied parent, with counts that include descendants."""
        direct: dict[str, set[int]] = {}
        for name, bookmark_id in self.store.execute(
            "SELECT t.name, bt.bookmark_id FROM tags t JOIN bookmark_tags bt ON bt.tag_id = t.id"
        ):
            direct.setdefault(name, set()).add(bookmark_id)
        total: dict[str, set[int]] = {}
        for name, ids in direct.items():
            for node in (*tagnames.ancestors(name), name):
                total.setdefault(node, set()).update(ids)
        return [
            TagCount(name, len(total[name]), len(direct.get(name, ())))
            for name in sorted(total, key=str.casefold)
        ]

    def tag_stats(self) -> TagStats:
        counts = self.tag_counts()
        real = [c for c in counts if c.direct]
        top = sorted(real, key=lambda c: -c.direct)[:10]
        return TagStats(
            tags=len(real),
            tree_nodes=len(counts),
            bookmarks=self.count(),
            untagged=self.untagged_count(),
            deepest=max((c.name.count("/") + 1 for c in counts), default=0),
            most_used=[TagUse(c.name, c.direct) for c in top],
        )

    def tag_copy(self, tag: str, ids: Iterable[int]) -> int:
        """Copy an existing tag onto bookmarks; returns how many did not have it yet."""
        (name,) = _clean_tags([tag])
        if not self.store.value("SELECT 1 FROM tags WHERE key = ?", (tagnames.key(name),)):
            raise NotFound(f"no tag {name!r} to copy")
        return self.tag_add(name, ids)

    def select_ids(
        self,
        *,
        ids: Iterable[int] = (),
        all_bookmarks: bool = False,
        starred: bool = False,
        filter_tags: Iterable[str] = (),
    ) -> list[int]:
        """The bookmarks a bulk tag operation acts on (the union of what is asked for)."""
        from marks import search

        chosen: set[int] = set()
        for bookmark_id in ids:
            chosen.add(self.get(bookmark_id).id)
        if all_bookmarks:
            chosen.update(row[0] for row in self.store.execute("SELECT id FROM bookmarks"))
        if starred:
            chosen.update(
                row[0] for row in self.store.execute("SELECT id FROM bookmarks WHERE starred = 1")
            )
        for tag in filter_tags:
            chosen.update(
                row[0]
                for row in self.store.execute(
                    f"SELECT id FROM bookmarks WHERE {search.tag_clause()}",
                    search.tag_bindings(tag),
                )
            )
        return sorted(chosen)

    def tag_add(self, tag: str, ids: Iterable[int]) -> int:
        """Add a tag to bookmarks; returns how many did not have it yet."""
        (name,) = _clean_tags([tag])
        ids = list(ids)
        with self.undoable("tag add"):
            self.before(ids)
            tag_id = self._tag_id(name)
            added = 0
            for bookmark_id in ids:
                self.store.execute(
                    "INSERT OR IGNORE INTO bookmark_tags (bookmark_id, tag_id) VALUES (?, ?)",
                    (bookmark_id, tag_id),
                )
                added += self.store.db.changes()
            self.said(f"added tag {name!r} to {added} bookmark(s)")
        return added

    def tag_remove(self, tag: str, ids: Iterable[int]) -> int:
        (name,) = _clean_tags([tag])
        ids = list(ids)
        with self.undoable("tag remove"):
            tag_id = self.store.value("SELECT id FROM tags WHERE key = ?", (tagnames.key(name),))
            if tag_id is None:
                raise NotFound(f"no tag {name!r}")
            self.before(ids)
            removed = 0
            for bookmark_id in ids:
                self.store.execute(
                    "DELETE FROM bookmark_tags WHERE bookmark_id = ? AND tag_id = ?",
                    (bookmark_id, tag_id),
                )
                removed += self.store.db.changes()
            self._drop_orphan_tags()
            self.said(f"removed tag {name!r} from {removed} bookmark(s)")
        return removed

    def rename_preview(self, old: str, new: str) -> tuple[str, str, int]:
        """What `tag_rename` would do: the clean names and how many bookmarks it touches."""
        from marks import search

        (old_name,) = _clean_tags([old])
        (new_name,) = _clean_tags([new])
        affected = self.store.value(
            f"SELECT count(*) FROM bookmarks WHERE {search.tag_clause()}",
            search.tag_bindings(old_name),
        )
        if not affected:
            raise NotFound(f"no bookmark has tag {old_name!r}")
        if tagnames.is_within(new_name, old_name) and new_name.casefold() != old_name.casefold():
            raise Invalid(f"cannot move {old_name!r} inside itself ({new_name!r})")
        return old_name, new_name, affected

    def tag_rename(self, old: str, new: str) -> int:
        """Rename a tag and its descendants, merging into tags that already exist."""
        from marks import search

        old_name, new_name, affected = self.rename_preview(old, new)
        with self.undoable("tag rename"):
            self.before(self._tagged(old_name))
            merged = self.store.value(
                "SELECT 1 FROM tags WHERE key = ? AND key != ?",
                (tagnames.key(new_name), tagnames.key(old_name)),
            )
            verb = "merged tag {!r} into {!r}" if merged else "renamed tag {!r} to {!r}"
            self.said(verb.format(old_name, new_name) + f" on {affected} bookmark(s)")
            rows = self.store.execute(
                f"SELECT id, name FROM tags WHERE {search.tag_keys()}",
                search.tag_bindings(old_name),
            ).fetchall()
            depth = old_name.count("/") + 1
            for tag_id, name in rows:
                target = "/".join([new_name, *str(name).split("/")[depth:]])
                existing = self.store.value(
                    "SELECT id FROM tags WHERE key = ? AND id != ?", (tagnames.key(target), tag_id)
                )
                if existing is None:
                    self.store.execute("UPDATE tags SET name = ? WHERE id = ?", (target, tag_id))
                else:
                    self.store.execute(
                        "INSERT OR IGNORE INTO bookmark_tags (bookmark_id, tag_id) "
                        "SELECT bookmark_id, ? FROM bookmark_tags WHERE tag_id = ?",
                        (existing, tag_id),
                    )
                    self.store.execute("DELETE FROM bookmark_tags WHERE tag_id = ?", (tag_id,))
            self._drop_orphan_tags()
        return affected

    def retag(
        self, ids: Iterable[int], *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> int:
        """Add and remove tags on many bookmarks in one transaction (every id must exist);
        returns how many tag links changed. Removing a tag no bookmark has changes nothing."""
        add, remove = _clean_tags(add), _clean_tags(remove)
        with self.undoable("bulk tags"):
            chosen = self.select_ids(ids=ids)
            self.before(chosen)
            changed = sum(self.tag_add(name, chosen) for name in add)
            for name in remove:
                if self.store.value("SELECT 1 FROM tags WHERE name = ?", (name,)):
                    changed += self.tag_remove(name, chosen)
            self.said(f"changed {changed} tag(s) on {len(chosen)} bookmark(s)")
        return changed

    def tag_delete(self, tag: str) -> int:
        """Remove a tag and its descendants from every bookmark (the bookmarks stay);
        returns how many bookmarks lost a tag."""
        from marks import search

        (name,) = _clean_tags([tag])
        with self.undoable("tag delete"):
            affected = self.store.value(
                f"SELECT count(*) FROM bookmarks WHERE {search.tag_clause()}",
                search.tag_bindings(name),
            )
            if not affected:
                raise NotFound(f"no bookmark has tag {name!r}")
            self.before(self._tagged(name))
            self.said(f"deleted tag {name!r} from {affected} bookmark(s)")
            self.store.execute(
                "DELETE FROM bookmark_tags WHERE tag_id IN "
                f"(SELECT id FROM tags WHERE {search.tag_keys()})",
                search.tag_bindings(name),
            )
            self._drop_orphan_tags()
        return affected

    def _tagged(self, name: str) -> list[int]:
        """Bookmarks with a tag or one of its descendants."""
        from marks import search

        return [
            bookmark_id
            for (bookmark_id,) in self.store.execute(
                f"SELECT id FROM bookmarks WHERE {search.tag_clause()}", search.tag_bindings(name)
            )
        ]

    # --- import and export -----------------------------------------------------------------------

    def merge_into(self, bookmark_id: int, record: Bookmark, tags: list[str] | None = None) -> None:
        """Union of tags; the earliest `added`; the highest visit data; fill empty text.
        The one rule for imports with --update and for `db dedupe`."""
        if tags is None:
            tags = _clean_tags(record.tags)
        self.store.execute(
            "UPDATE bookmarks SET "
            "added = min(added, coalesce(?, added)), "
            "last_visited = CASE WHEN ? > coalesce(last_visited, '') THEN ? ELSE last_visited END, "
            "visit_count = max(visit_count, ?), "
            "title = CASE title WHEN '' THEN ? ELSE title END, "
            "description = CASE description WHEN '' THEN ? ELSE description END, "
            "starred = max(starred, ?), archived = max(archived, ?) WHERE id = ?",
            (
                clock.to_text(record.added),
                clock.to_text(record.last_visited) or "",
                clock.to_text(record.last_visited),
                record.visit_count,
                record.title.strip(),
                record.description.strip(),
                int(record.starred),
                int(record.archived),
                bookmark_id,
            ),
        )
        self._link(bookmark_id, tags)
