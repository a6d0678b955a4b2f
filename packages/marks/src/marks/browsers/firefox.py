"""Firefox: `places.sqlite`, read from a private copy (see `snapshot`).

`moz_bookmarks` is a tree: type 1 rows are bookmarks pointing (`fk`) at a `moz_places` row, type 2
rows are folders. The root (parent 0) and its children -- menu, toolbar, unfiled, mobile, tags --
are Firefox's own folders and are dropped; folders below them become hierarchical tags. Firefox's
tags are folders under the tags root holding one bookmark row per tagged place; they become
tags. Times are microseconds since 1970.
"""

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

from marks import tagnames
from marks.browsers import snapshot, times
from marks.browsers.visits import Visit
from marks.library import Record

PLACES = "places.sqlite"
TABLES = {
    "moz_places": ("id", "url", "title", "visit_count", "last_visit_date"),
    "moz_bookmarks": ("id", "type", "fk", "parent", "title", "dateAdded"),
}
BOOKMARK, FOLDER = 1, 2


class Reader:
    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.path = profile / PLACES
        self._stack = contextlib.ExitStack()
        self.db: apsw.Connection | None = None

    def __enter__(self) -> "Reader":
        self.db = self._stack.enter_context(snapshot.opened(self.path, TABLES))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        self.db = None

    def _rows(self, sql: str, bindings: "apsw.Bindings" = ()) -> Iterator[tuple[Any, ...]]:
        assert self.db is not None, "use the reader as a context manager"
        return snapshot.rows(self.db, self.path, sql, bindings)

    def _tree(self) -> tuple[dict[int, str], dict[int, str]]:
        """Each folder's tag path ('' for Firefox's own folders), and the tag folders' names."""
        folders = {
            fid: (parent, title or "", guid)
            for fid, parent, title, guid in self._rows(
                f"SELECT id, parent, title, {self._guid} FROM moz_bookmarks WHERE type = ?",
                (FOLDER,),
            )
        }
        roots = {fid for fid, (parent, _, _) in folders.items() if parent not in folders}
        own = roots | {fid for fid, (parent, _, _) in folders.items() if parent in roots}
        tags_root = {
            fid
            for fid in own - roots
            if folders[fid][2] == "tags________"
            or (not folders[fid][2] and folders[fid][1] == "Tags")
        }
        tag_folders = {
            fid: tagnames.from_folder(title)
            for fid, (parent, title, _) in folders.items()
            if parent in tags_root
        }
        paths: dict[int, str] = dict.fromkeys(own, "")
        for start in folders:
            chain, node = [], start
            while node not in paths and node in folders and node not in chain:
                chain.append(node)
                node = folders[node][0]
            prefix = paths.get(node, "")
            for step in reversed(chain):
                name = tagnames.from_folder(folders[step][1])
                prefix = f"{prefix}/{name}" if prefix and name else prefix or name
                paths[step] = prefix
        for fid in tags_root | set(tag_folders):
            paths[fid] = ""
        return paths, tag_folders | dict.fromkeys(tags_root, "")

    @property
    def _guid(self) -> str:
        """Firefox has had `guid` since version 4; older files are read without it."""
        columns = {row[1] for row in self._rows("PRAGMA table_info(moz_bookmarks)")}
        return "guid" if "guid" in columns else "NULL"

    def _firefox_tags(self, tag_folders: dict[int, str]) -> dict[int, list[str]]:
        """place id -> Firefox's own tags on it."""
        tags: dict[int, list[str]] = {}
        for place, parent in self._rows(
            "SELECT fk, parent FROM moz_bookmarks WHERE type = ? AND fk IS NOT NULL",
            (BOOKMARK,),
        ):
            if tag_folders.get(parent):
                tags.setdefault(place, []).append(tag_folders[parent])
        return tags

    def count(self) -> int:
        _, tag_folders = self._tree()
        return sum(
            1
            for (parent,) in self._rows(
                "SELECT parent FROM moz_bookmarks WHERE type = ? AND fk IS NOT NULL", (BOOKMARK,)
            )
            if parent not in tag_folders
        )

    def urls(self) -> Iterator[str]:
        for (url,) in self._rows(
            "SELECT p.url FROM moz_bookmarks b JOIN moz_places p ON p.id = b.fk WHERE b.type = ?",
            (BOOKMARK,),
        ):
            yield url or ""

    def bookmarks(self) -> Iterator[Record]:
        paths, tag_folders = self._tree()
        own_tags = self._firefox_tags(tag_folders)
        for place, parent, title, added, url, page_title in self._rows(
            "SELECT b.fk, b.parent, b.title, b.dateAdded, p.url, p.title "
            "FROM moz_bookmarks b JOIN moz_places p ON p.id = b.fk "
            "WHERE b.type = ? ORDER BY b.parent, b.position, b.id",
            (BOOKMARK,),
        ):
            if parent in tag_folders:
                continue
            folder = paths.get(parent, "")
            yield Record(
                url=url or "",
                title=title or page_title or "",
                tags=([folder] if folder else []) + own_tags.get(place, []),
                added=times.firefox(added),
            )

    def history(self, since: dt.datetime | None = None) -> Iterator[Visit]:
        sql = (
            "SELECT url, title, visit_count, last_visit_date FROM moz_places "
            "WHERE last_visit_date IS NOT NULL AND visit_count > 0"
        )
        bindings: tuple = ()
        if since is not None:
            sql += " AND last_visit_date >= ?"
            bindings = (times.to_firefox(since),)
        for url, title, count, last in self._rows(sql, bindings):
            yield Visit(url or "", title or "", int(count or 0), times.firefox(last))
