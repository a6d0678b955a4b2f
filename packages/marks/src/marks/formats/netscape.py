"""The Netscape bookmark file (what every browser exports as HTML), read and written.

Reading is one pass of a compiled regular expression over the file, which tolerates what
browsers write (unclosed `<DT>` and `<p>`, upper-case tags, entities, comments), so time is
linear in the file whatever the folder shape (and three times faster than html.parser).
Folders become hierarchical tags (`Folder/Sub`); the browsers' own root folders ("Bookmarks
bar", "Other bookmarks", ...) are dropped; `TAGS`, `ADD_DATE`, `LAST_VISIT` and `<DD>`
descriptions are kept.
"""

import html
import re
from collections.abc import Iterable, Iterator
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


# A comment, a declaration, or a tag whose attribute values may hold `>` inside quotes.
_MARKUP = re.compile(
    r"<!--.*?-->|<![^>]*>|<(/?)([A-Za-z][A-Za-z0-9]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>", re.DOTALL
)
_ATTRIBUTE = re.compile(
    r"""([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?"""
)


def _attributes(text: str) -> list[tuple[str, str | None]]:
    found = []
    for match in _ATTRIBUTE.finditer(text):
        name, double, single, bare = match.groups()
        value = double if double is not None else single if single is not None else bare
        found.append((name.lower(), html.unescape(value) if value and "&" in value else value))
    return found


class _Reader:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.folders: list[str | None] = []  # one entry per open <DL>; None = not a tag
        self.pending_folder: str | None = None  # an <H3> waiting for its <DL>
        self.text: list[str] | None = None  # collecting <A> or <H3> text
        self.link: dict[str, str | None] | None = None
        self.heading: dict[str, str | None] | None = None
        self.description: list[str] | None = None
        self.last: Record | None = None

    def _finish_description(self) -> None:
        if self.description is not None and self.last is not None:
            self.last.description = "".join(self.description).strip()
        self.description = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("dt", "dl", "h3", "a", "hr"):
            self._finish_description()
        if tag == "dl":
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
            # A browser's marker attribute is unambiguous at any depth (a truncated earlier
            # document may have left folders open); a well-known name counts only at the top.
            marked = any(
                (self.heading.get(marker) or "").lower() == "true" for marker in ROOT_MARKERS
            )
            is_root = marked or (depth <= 1 and name.casefold() in ROOT_FOLDERS)
            self.pending_folder = None if is_root or not name else tagnames.from_folder(name)
            self.heading = self.text = None
        elif tag == "a" and self.link is not None:
            self._add_link("".join(self.text or []).strip())
            self.link = self.text = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(html.unescape(data) if "&" in data else data)
        elif self.description is not None:
            self.description.append(html.unescape(data) if "&" in data else data)

    def feed(self, document: str) -> Iterator[Record]:
        position = 0
        for match in _MARKUP.finditer(document):
            if match.start() > position:
                self.handle_data(document[position : match.start()])
            position = match.end()
            closing, name, attributes = match.groups()
            if name is None:
                continue  # comment or declaration
            if closing:
                self.handle_endtag(name.lower())
            else:
                self.handle_starttag(name.lower(), _attributes(attributes))
            if self.records:
                yield from self.records
                self.records.clear()
        self.handle_data(document[position:])
        self._finish_description()
        yield from self.records

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
    document = stream.read()
    lowered = document[:65536].lower()
    if document.strip() and "<a" not in lowered and "<dl" not in lowered:
        raise FormatError("not a Netscape bookmark file (no <DL> or <A> elements)")
    yield from _Reader().feed(document)


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
