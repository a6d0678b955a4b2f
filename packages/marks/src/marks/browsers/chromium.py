"""Chrome, Chromium, Edge and Brave: the `Bookmarks` JSON file and the `History` database.

`Bookmarks` holds `roots` (`bookmark_bar`, `other`, `synced`), folders with `children`, and
`date_added` in microseconds since 1601 as a string. The roots are the browser's own folders and
are dropped; every folder below becomes one segment of a hierarchical tag. `History` is SQLite:
`urls` has one row per page with `visit_count` and `last_visit_time` (microseconds since 1601).
"""

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import msgspec

from marks import tagnames
from marks.browsers import BrowserError, snapshot, times
from marks.browsers.visits import Visit
from marks.library import Record

BOOKMARKS = "Bookmarks"
HISTORY = "History"
HISTORY_TABLES = {"urls": ("url", "title", "visit_count", "last_visit_time")}


class Node(msgspec.Struct):
    type: str = ""
    name: str = ""
    url: str = ""
    date_added: str | int = "0"
    children: list["Node"] = []


class File(msgspec.Struct):
    roots: dict[str, Node | str | int | None] = {}
    version: int = 1


_decoder = msgspec.json.Decoder(File)


class Reader:
    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.path = profile / BOOKMARKS
        self._roots: list[Node] | None = None

    def _load(self) -> list[Node]:
        if self._roots is None:
            if not self.path.is_file():
                self._roots = []  # Chromium writes the file with the first bookmark
                return self._roots
            try:
                data = _decoder.decode(self.path.read_bytes())
            except OSError as error:
                raise BrowserError(f"{self.path}: cannot read ({error.strerror})") from None
            except msgspec.DecodeError as error:
                raise BrowserError(
                    f"{self.path}: not a Chromium Bookmarks file ({error})"
                ) from None
            except RecursionError:
                raise BrowserError(f"{self.path}: folders nested too deeply to read") from None
            if data.version != 1:
                raise BrowserError(f"{self.path}: unknown Bookmarks version {data.version}")
            self._roots = [node for node in data.roots.values() if isinstance(node, Node)]
        return self._roots

    def count(self) -> int:
        return sum(1 for _ in self._walk())

    def _walk(self) -> Iterator[tuple[Node, str]]:
        # The roots are the browser's own folders (bar, other, mobile): not tags. An explicit
        # stack, since folder depth is whatever the person made it.
        stack = [
            (child, "") for root in reversed(self._load()) for child in reversed(root.children)
        ]
        while stack:
            node, folder = stack.pop()
            if node.type == "url" or (node.url and not node.children):
                yield node, folder
                continue
            name = tagnames.from_folder(node.name)
            inner = f"{folder}/{name}" if folder and name else folder or name
            stack.extend((child, inner) for child in reversed(node.children))

    def urls(self) -> Iterator[str]:
        for node, _ in self._walk():
            yield node.url

    def bookmarks(self) -> Iterator[Record]:
        for node, folder in self._walk():
            yield Record(
                url=node.url,
                title=node.name,
                tags=[folder] if folder else [],
                added=times.chromium(node.date_added),
            )

    def history(self, since: dt.datetime | None = None) -> Iterator[Visit]:
        path = self.profile / HISTORY
        sql = "SELECT url, title, visit_count, last_visit_time FROM urls"
        bindings: tuple = ()
        if since is not None:
            sql += " WHERE last_visit_time >= ?"
            bindings = (times.to_chromium(since),)
        with snapshot.opened(path, HISTORY_TABLES) as db:
            for url, title, count, last in snapshot.rows(db, path, sql, bindings):
                yield Visit(url or "", title or "", int(count or 0), times.chromium(last))

    def __enter__(self) -> "Reader":
        self._load()
        return self

    def __exit__(self, *exc: object) -> None:
        self._roots = None
