"""Safari: `Bookmarks.plist` (a binary or XML property list) and `History.db` (SQLite).

The plist is a tree of dictionaries: `WebBookmarkTypeList` folders with `Title` and `Children`,
`WebBookmarkTypeLeaf` bookmarks with `URLString` and `URIDictionary.title`. The top folders
`BookmarksBar` and `BookmarksMenu` are Safari's own and are dropped; the Reading List
(`com.apple.ReadingList`) becomes the tag `Reading List`, its preview text the description.
`History.db` keeps `history_items` (one per page, with `visit_count`) and `history_visits`
(`visit_time` in seconds since 2001).
"""

import datetime as dt
import plistlib
from collections.abc import Iterator
from pathlib import Path

from marks import tagnames
from marks.browsers import BrowserError, snapshot, times
from marks.browsers.visits import Visit
from marks.library import Record

BOOKMARKS = "Bookmarks.plist"
HISTORY = "History.db"
HISTORY_TABLES = {
    "history_items": ("id", "url", "visit_count"),
    "history_visits": ("history_item", "visit_time", "title"),
}
OWN_FOLDERS = {"BookmarksBar", "BookmarksMenu"}
READING_LIST = "com.apple.ReadingList"


def _utc(value: object) -> dt.datetime | None:
    if not isinstance(value, dt.datetime):
        return None
    # plistlib gives naive datetimes that are UTC (the format stores UTC).
    return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).replace(microsecond=0)


class Reader:
    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.path = profile / BOOKMARKS
        self._root: dict | None = None

    def __enter__(self) -> "Reader":
        self._load()
        return self

    def __exit__(self, *exc: object) -> None:
        self._root = None

    def _load(self) -> dict:
        if self._root is None:
            try:
                with open(self.path, "rb") as source:
                    root = plistlib.load(source)
            except FileNotFoundError:
                raise BrowserError(f"{self.path}: no such file") from None
            except OSError as error:
                raise BrowserError(f"{self.path}: cannot read ({error.strerror})") from None
            except (plistlib.InvalidFileException, ValueError, TypeError) as error:
                raise BrowserError(f"{self.path}: not a property list ({error})") from None
            if not isinstance(root, dict) or not isinstance(root.get("Children", []), list):
                raise BrowserError(f"{self.path}: not a Safari bookmarks file")
            version = root.get("WebBookmarkFileVersion", 1)
            if version != 1:
                raise BrowserError(f"{self.path}: unknown bookmarks file version {version}")
            self._root = root
        return self._root

    def _walk(self) -> Iterator[tuple[dict, str, bool]]:
        stack: list[tuple[object, str, bool, int]] = [
            (child, "", False, 0) for child in reversed(self._load().get("Children", []))
        ]
        while stack:
            node, folder, reading, depth = stack.pop()
            if not isinstance(node, dict):
                continue
            kind = node.get("WebBookmarkType")
            if kind == "WebBookmarkTypeLeaf":
                yield node, folder, reading
            elif kind == "WebBookmarkTypeList":
                title = str(node.get("Title", ""))
                inner, is_reading = folder, reading
                if depth == 0 and title == READING_LIST:
                    inner, is_reading = "Reading List", True
                elif not (depth == 0 and title in OWN_FOLDERS):
                    name = tagnames.from_folder(title)
                    inner = f"{folder}/{name}" if folder and name else folder or name
                children = node.get("Children", [])
                if isinstance(children, list):
                    stack.extend(
                        (child, inner, is_reading, depth + 1) for child in reversed(children)
                    )

    def count(self) -> int:
        return sum(1 for _ in self._walk())

    def urls(self) -> Iterator[str]:
        for node, _, _ in self._walk():
            yield str(node.get("URLString", ""))

    def bookmarks(self) -> Iterator[Record]:
        for node, folder, reading in self._walk():
            uri = node.get("URIDictionary")
            title = uri.get("title", "") if isinstance(uri, dict) else ""
            extra = node.get("ReadingList") if reading else None
            extra = extra if isinstance(extra, dict) else {}
            yield Record(
                url=str(node.get("URLString", "")),
                title=str(title or ""),
                description=str(extra.get("PreviewText", "") or ""),
                tags=[folder] if folder else [],
                added=_utc(extra.get("DateAdded")),
            )

    def history(self, since: dt.datetime | None = None) -> Iterator[Visit]:
        path = self.profile / HISTORY
        # SQLite gives the bare column `v.title` from the row holding max(visit_time).
        sql = (
            "SELECT i.url, v.title, i.visit_count, max(v.visit_time) FROM history_items i "
            "JOIN history_visits v ON v.history_item = i.id GROUP BY i.id"
        )
        bindings: tuple = ()
        if since is not None:
            sql += " HAVING max(v.visit_time) >= ?"
            bindings = (times.to_safari(since),)
        with snapshot.opened(path, HISTORY_TABLES) as db:
            for url, title, count, last in snapshot.rows(db, path, sql, bindings):
                yield Visit(url or "", title or "", int(count or 0), times.safari(last))
