"""The Netscape bookmark file (what every browser exports as HTML), read and written.

Reading is one pass of the standard library's HTML parser, which tolerates what browsers write
(unclosed `<DT>` and `<p>`, upper-case tags, entities), so time is linear in the file whatever the
folder shape. Folders become hierarchical tags (`Folder/Sub`); the browsers' own root folders
("Bookmarks bar", "Other bookmarks", ...) are dropped; `TAGS`, `ADD_DATE`, `LAST_VISIT` and `<DD>`
descriptions are kept.
"""

import html
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from typing import TextIO

from marks import clock, tagnames
from marks.formats import FormatError
from marks.library import Record
from marks.wire import Bookmark

ROOT_FOLDERS = {
    "bookmarks bar",
    "bookmarks toolbar",
    "bookmarks menu",
    "other bookmarks",
    "mobile bookmarks",
    "favorites bar",
    "favourites bar",
    "favorites",
    "other favorites",
    "unsorted bookmarks",
    "personal toolbar folder",
    "synced bookmarks",
}
ROOT_MARKERS = ("personal_toolbar_folder", "unfiled_bookmarks_folder")


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.records: list[Record] = []
        self.folders: list[str | None] = []  # one entry per open <DL>; None = not a tag
        self.pending_folder: str | None = None  # an <H3> waiting for its <DL>
        self.text: list[str] | None = None  # collecting <A> or <H3> text
        self.link: dict[str, str | None] | None = None
        self.heading: dict[str, str | None] | None = None
        self.description: list[str] | None = None
        self.last: Record | None = None
        self.seen_dl = False

    def _finish_description(self) -> None:
        if self.description is not None and self.last is not None:
            self.last.description = "".join(self.description).strip()
        self.description = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("dt", "dl", "h3", "a", "hr"):
            self._finish_description()
        if tag == "dl":
            self.seen_dl = True
            self.folders.append(self.pending_folder)
            self.pending_folder = None
        elif tag == "h3":
            self.heading, self.text = dict(attrs), []
        elif tag == "a":
            self.link, self.text = dict(attrs), []
        elif tag == "dd":
            self.description = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "dl":
            self._finish_description()
            if self.folders:
                self.folders.pop()
        elif tag == "h3" and self.heading is not None:
            name = "".join(self.text or []).strip()
            depth = len(self.folders)
            is_root = depth <= 1 and (
                name.casefold() in ROOT_FOLDERS
                or any(
                    (self.heading.get(marker) or "").lower() == "true" for marker in ROOT_MARKERS
                )
            )
            self.pending_folder = None if is_root or not name else tagnames.from_folder(name)
            self.heading = self.text = None
        elif tag == "a" and self.link is not None:
            self._add_link("".join(self.text or []).strip())
            self.link = self.text = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)
        elif self.description is not None:
            self.description.append(data)

    def _add_link(self, title: str) -> None:
        link = self.link or {}
        href = (link.get("href") or "").strip()
        path = "/".join(folder for folder in self.folders if folder)
        tags = [path] if path else []
        tags += [tag for tag in (link.get("tags") or "").split(",") if tag.strip()]
        self.last = Record(
            url=href,
            title=title,
            tags=tags,
            added=clock.from_epoch(link.get("add_date")),
            last_visited=clock.from_epoch(link.get("last_visit")),
        )
        if self.last.last_visited is not None:
            self.last.visit_count = 1  # a recorded visit means at least one
        self.records.append(self.last)


def read(stream: TextIO) -> Iterator[Record]:
    reader = _Reader()
    head = stream.read(64 * 1024)
    if "<a" not in head.lower() and "<dl" not in head.lower() and head.strip():
        raise FormatError("not a Netscape bookmark file (no <DL> or <A> elements)")
    chunk = head
    while chunk:
        reader.feed(chunk)
        yield from reader.records
        reader.records.clear()
        chunk = stream.read(1 << 20)
    reader.close()
    reader._finish_description()
    yield from reader.records
    if not reader.seen_dl and reader.last is None and head.strip():
        raise FormatError("not a Netscape bookmark file (no bookmarks or folders found)")


# --- writing -------------------------------------------------------------------------------------

HEADER = """<!DOCTYPE NETSCAPE-Bookmark-file-1>
<!-- This is an automatically generated file.
     It will be read and overwritten.
     DO NOT EDIT! -->
<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">
<TITLE>Bookmarks</TITLE>
<H1>Bookmarks</H1>
<DL><p>
"""


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _entry(bookmark: Bookmark, indent: str) -> str:
    attributes = [f'HREF="{_escape(bookmark.url)}"']
    if bookmark.added:
        attributes.append(f'ADD_DATE="{int(bookmark.added.timestamp())}"')
    if bookmark.last_visited:
        attributes.append(f'LAST_VISIT="{int(bookmark.last_visited.timestamp())}"')
    if bookmark.tags:
        attributes.append(f'TAGS="{_escape(",".join(bookmark.tags))}"')
    line = f"{indent}<DT><A {' '.join(attributes)}>{_escape(bookmark.title)}</A>\n"
    if bookmark.description:
        line += f"{indent}<DD>{_escape(bookmark.description)}\n"
    return line


def write(bookmarks: Iterable[Bookmark], out: TextIO, *, hierarchical: bool = False) -> int:
    """Write the file; with `hierarchical`, each bookmark sits once in the folder of its first
    tag (all its tags stay in TAGS, so nothing is lost on the way back)."""
    out.write(HEADER)
    count = 0
    if not hierarchical:
        for bookmark in bookmarks:
            out.write(_entry(bookmark, "    "))
            count += 1
        out.write("</DL><p>\n")
        return count
    tree: dict = {}
    for bookmark in bookmarks:
        node = tree
        if bookmark.tags:
            for part in bookmark.tags[0].split("/"):
                node = node.setdefault(part, {})
        node.setdefault(None, []).append(bookmark)
        count += 1
    _write_folder(tree, out, 1)
    out.write("</DL><p>\n")
    return count


def _write_folder(node: dict, out: TextIO, depth: int) -> None:
    indent = "    " * depth
    for bookmark in node.get(None, []):
        out.write(_entry(bookmark, indent))
    for name in sorted((key for key in node if key is not None), key=str.casefold):
        out.write(f"{indent}<DT><H3>{_escape(name)}</H3>\n{indent}<DL><p>\n")
        _write_folder(node[name], out, depth + 1)
        out.write(f"{indent}</DL><p>\n")
