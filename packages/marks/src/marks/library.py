"""The service layer: every rule about bookmarks and tags, each operation one transaction.

Front ends (CLI, shell, REST server) call this and nothing below it. Errors are `MarksError`
subclasses whose message is one line a person can act on.
"""

from collections.abc import Iterable

from marks import clock, tagcounts, tagnames
from marks.bookmarks import EDITABLE, FULL_TEXT_MISSING, SORTS, Bookmarks, Record, clean_tags
from marks.exceptions import Duplicate, Invalid, MarksError, NotFound
from marks.wire import Bookmark, TagCount, TagStats, TagUse

__all__ = [
    "EDITABLE",
    "FULL_TEXT_MISSING",
    "SORTS",
    "Duplicate",
    "Invalid",
    "Library",
    "MarksError",
    "NotFound",
    "Record",
]


class Library(Bookmarks):
    """The service layer: bookmarks (`marks.bookmarks`), and here their tags and the rules of
    import and export."""

    # --- tags ------------------------------------------------------------------------------------

    def tags_changed(self) -> None:
        """Tags came back or went below the library (a restore, an undo): orphans go, and the
        cached tag ids are forgotten."""
        self._drop_orphan_tags()

    def tag_counts(self) -> list[TagCount]:
        """Every tag and every implied parent, with counts that include descendants (kept until
        the library changes: do not modify the list)."""
        return tagcounts.tag_counts(self.store)

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
        (name,) = clean_tags([tag])
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
        (name,) = clean_tags([tag])
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
        (name,) = clean_tags([tag])
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

        (old_name,) = clean_tags([old])
        (new_name,) = clean_tags([new])
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
        add, remove = clean_tags(add), clean_tags(remove)
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

        (name,) = clean_tags([tag])
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
            tags = clean_tags(record.tags)
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
