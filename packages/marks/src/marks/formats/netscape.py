"""The Netscape bookmark file (what every browser exports as HTML), read and written.

Reading is one pass of a compiled regular expression over the file, which tolerates what
browsers write (unclosed `<DT>`, `<p>` and `<A>`, upper-case tags, entities, comments), so time is
linear in the file whatever the folder shape (and three times faster than html.parser). The text
comes in pieces (see `_Reader.feed`), so memory does not grow with the file.
Folders become hierarchical tags (`Folder/Sub`); the browsers' own root folders are dropped (the
rule is in `roots`); a `<DD>` describes the bookmark right before it (after a folder it describes
the folder, and marks keeps no folder descriptions). Attributes other producers write are kept:
`TAGS`, `ADD_DATE` (Pocket: `TIME_ADDED`), `LAST_VISIT`, `PRIVATE`/`TOREAD` (Delicious, Pinboard,
linkding, Shaarli: the tags `private` and `toread`), Pocket's and Instapaper's sections (`<H1>Read
Archive</H1>`, `Starred`), and the fields marks itself writes (`STARRED`, `ARCHIVED`,
`VISIT_COUNT`, `LAST_CHECKED`, `REACHABLE`, `CHECK_RESULT`).
"""

import html
import itertools
import re
from collections.abc import Generator, Iterable, Iterator
from typing import TextIO
from urllib.parse import urljoin

from marks import tagnames
from marks.formats import FormatError, Record, dates, roots
from marks.wire import Bookmark

PRIVATE_TAG = "private"
TOREAD_TAG = "toread"
# Section headings (<H1>) of Pocket's and Instapaper's exports and what they mean.
SECTIONS = {
    "unread": {},
    "read archive": {"archived": True},
    "archive": {"archived": True},
    "starred": {"starred": True},
}


# After a `<`: a comment, a declaration, or a tag whose attribute values may hold `>` inside
# quotes; last, nothing (an empty group): a `<` that could start one of them but does not within
# the text at hand. A piece of the file can end inside a tag or a comment (or a quote may close
# only later), so there the reader waits for more text; at the end of the file such a `<` is
# text, as the first three alone would leave it. The `<` stays outside the alternatives: a
# pattern that starts with a literal lets the engine jump from `<` to `<` (twice as fast).
#
# First of all, the common case whole: a link as browsers write it, `<DT><A attributes>text</A>`
# (the `<DT>` may be absent), whose text holds no markup. One match instead of four tags and a
# text handled one by one, read exactly as they would be (the last group, `(?:>|\Z)`, is never
# taken: it only keeps the groups of the general alternatives numbered as before).
_ATTRIBUTES = r"((?:[^>\"']|\"[^\"]*\"|'[^']*')*)"
_MARKUP = re.compile(
    r"<(?:((?:[Dd][Tt]><)?)[Aa](\s" + _ATTRIBUTES[1:] + r">([^<]*)</[Aa]>"
    r"|!--.*?-->|(![^>]*>)|(/?)([A-Za-z][A-Za-z0-9]*)" + _ATTRIBUTES + r">"
    r"|()(?=[A-Za-z!]|/[A-Za-z]|/?\Z))",
    re.DOTALL,
)
HEAD = 65536  # characters in which a bookmark file shows an <A> or a <DL>
_ATTRIBUTE = re.compile(
    r"""([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?"""
)
_TRUE = {"1", "true", "yes", "on"}
_REACHABLE = {"1": True, "0": False}
# Tags that end an <A> its producer never closed (and a <DD> that is being collected).
_ENDS_LINK = {"dt", "dd", "dl", "h3", "a", "hr", "li", "ul", "ol", "h1", "p"}


def _attributes(text: str) -> dict[str, str | None]:
    found = {}
    for name, double, single, bare in _ATTRIBUTE.findall(text):
        value = double or single or bare  # findall gives "" for the alternatives not taken
        found[name.lower()] = html.unescape(value) if value and "&" in value else value
    return found


class _Reader:
    def __init__(self, base_url: str | None = None) -> None:
        self.base_url = base_url
        self.records: list[Record] = []
        self.folders: list[str | None] = []  # one entry per open <DL>; None = not a tag
        self.path: str | None = None  # the folders as one tag, None until a link asks again
        self.pending_folder: str | None = None  # an <H3> waiting for its <DL>
        self.text: list[str] | None = None  # collecting <A>, <H3> or <H1> text
        self.link: dict[str, str | None] | None = None
        self.link_line = 0
        self.heading: dict[str, str | None] | None = None
        self.section: dict[str, bool] = {}  # flags from the current <H1> section
        self.in_h1 = False
        self.description: list[str] | None = None
        self.last: Record | None = None  # the bookmark a <DD> right now would describe
        self.line = 1  # the line of `counted`, advanced only when a bookmark asks for it
        self.counted = 0
        self.position = 0  # where the tag being handled starts
        self.document = ""

    def _finish_description(self) -> None:
        if self.description is not None and self.last is not None:
            self.last.description = "".join(self.description).strip()
        self.description = None

    def handle_starttag(self, tag: str, attrs: dict[str, str | None]) -> None:
        if tag in _ENDS_LINK:
            if self.link is not None and tag != "p":
                self._finish_link()
            if tag != "p":
                self._finish_description()
        if tag == "dl":
            self.folders.append(self.pending_folder)
            self.path = None
            self.pending_folder = None
            self.last = None
        elif tag == "h3":
            self.heading, self.text = attrs, []
            self.last = None  # a <DD> after a folder describes the folder
        elif tag == "h1":
            self.in_h1, self.text = True, []
            self.last = None
        elif tag == "a":
            self.line += self.document.count("\n", self.counted, self.position)
            self.counted = self.position
            self.link, self.text, self.link_line = attrs, [], self.line
        elif tag == "dd":
            self.description = []
        elif tag == "hr":
            self.last = None

    def handle_endtag(self, tag: str) -> None:
        if tag in ("dl", "ul", "ol", "dt", "li") and self.link is not None:
            self._finish_link()
        if tag == "dl":
            self._finish_description()
            self.last = None
            if self.folders:
                self.folders.pop()
                self.path = None
        elif tag == "h3" and self.heading is not None:
            name = "".join(self.text or []).strip()
            depth = len(self.folders)
            # A browser's marker attribute is unambiguous at any depth (a truncated earlier
            # document may have left folders open); a well-known name counts only at the top.
            marked = any(
                (self.heading.get(marker) or "").lower() == "true" for marker in roots.MARKERS
            )
            is_root = marked or (depth <= 1 and roots.is_root_name(name))
            self.pending_folder = None if is_root or not name else tagnames.from_folder(name)
            self.heading = self.text = None
        elif tag == "h1" and self.in_h1:
            name = " ".join("".join(self.text or []).split()).casefold()
            self.section = SECTIONS.get(name, self.section if name in ("bookmarks",) else {})
            self.in_h1, self.text = False, None
        elif tag == "a" and self.link is not None:
            self._finish_link()

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(html.unescape(data) if "&" in data else data)
        elif self.description is not None:
            self.description.append(html.unescape(data) if "&" in data else data)

    def feed(self, pieces: Iterable[str]) -> Iterator[Record]:
        """Records from the document's text in pieces of any size: the same records, with the
        same lines, as from the whole text at once."""
        pieces = iter(pieces)
        upcoming = next(pieces, None)
        buffer = ""
        held = 0  # text kept for the next scan: it is read again, so read as much more first
        while True:
            parts, added = [buffer], 0
            while upcoming is not None and (added == 0 or added < held):
                parts.append(upcoming)
                added += len(upcoming)
                upcoming = next(pieces, None)
            buffer = "".join(parts)
            final = upcoming is None
            cut = yield from self._scan(buffer, final)
            if final:
                return
            # Lines are counted lazily (from `counted` to the next link): count what is let go.
            self.line += buffer.count("\n", self.counted, cut)
            self.counted = 0
            buffer = buffer[cut:]
            held = len(buffer)

    def _scan(self, document: str, final: bool) -> Generator[Record, None, int]:
        """Handle the markup in `document`; unless it is the end of the file, stop before the
        first piece of markup that more text could change, and return where the text not yet
        handled starts (text between tags is handled whole, so an entity is never split)."""
        position = 0
        self.document = document
        for match in _MARKUP.finditer(document):
            opened, link, title, declaration, closing, name, attributes, unfinished = match.groups()
            if link is not None:  # a whole link (see _MARKUP)
                start = match.start()
                if start > position and (self.text is not None or self.description is not None):
                    self.handle_data(document[position:start])
                position = match.end()
                self.position = start + len(opened)
                self._whole_link(link, title)
                yield from self.records
                self.records.clear()
                continue
            if name is None and (  # (tested first: most markup is tags)
                unfinished is not None
                or (declaration is not None and declaration.startswith("!--"))  # "-->" may follow
            ):
                if not final:
                    return position
                if unfinished is not None:
                    continue  # the end of the file: that `<` is text
            start = match.start()
            if start > position and (self.text is not None or self.description is not None):
                self.handle_data(document[position:start])
            position = match.end()
            if name is None:
                continue  # comment or declaration
            self.position = start
            name = name.lower()
            if closing:
                self.handle_endtag(name)
            else:  # only links and folders have attributes marks reads
                self.handle_starttag(
                    name, _attributes(attributes) if name in ("a", "h3") and attributes else {}
                )
            if self.records:
                yield from self.records
                self.records.clear()
        if not final:
            return position
        self.handle_data(document[position:])
        if self.link is not None:
            self._finish_link()
        self._finish_description()
        yield from self.records
        self.records.clear()
        return len(document)

    def _whole_link(self, attributes: str, text: str) -> None:
        """What `<DT>`, `<A attributes>`, `text` and `</A>` do handled one by one."""
        if self.link is not None:
            self._finish_link()
        if self.description is not None:
            self._finish_description()
        self.line += self.document.count("\n", self.counted, self.position)
        self.counted = self.position
        self.link, self.link_line = _attributes(attributes), self.line
        self.text = [html.unescape(text) if "&" in text else text]
        self._finish_link()

    def _finish_link(self) -> None:
        link = self.link or {}
        title = "".join(self.text or []).strip()
        self.link = self.text = None
        get = link.get
        href = (get("href") or "").strip()
        notes: list[str] = []
        if href.startswith("?") and len(href) > 1:
            if self.base_url:
                href = urljoin(self.base_url, href)
            else:
                notes.append("a Shaarli note: import with --base-url (the Shaarli's address)")
        if self.path is None:  # the folders changed since the last link
            self.path = "/".join(folder for folder in self.folders if folder)
        tags = [self.path] if self.path else []
        named = get("tags")
        if named:
            tags += [tag for tag in named.split(",") if tag.strip()]
        if "private" in link and (get("private") or "").lower() in _TRUE:
            tags.append(PRIVATE_TAG)
        if "toread" in link and (get("toread") or "").lower() in _TRUE:
            tags.append(TOREAD_TAG)
        raw_added = get("add_date") or get("time_added")
        added = dates.parse_into(raw_added, notes, "ADD_DATE") if raw_added else None
        visit = get("last_visit")
        last_visited = dates.parse_into(visit, notes, "LAST_VISIT") if visit else None
        checked = get("last_checked")
        visits = get("visit_count") or ""
        section = self.section
        record = Record(
            url=href,
            title=title,
            tags=tags,
            added=added,
            last_visited=last_visited,
            visit_count=int(visits) if visits.isdigit() else int(last_visited is not None),
            starred=("starred" in link and (get("starred") or "").lower() in _TRUE)
            or (bool(section) and section.get("starred", False)),
            archived=("archived" in link and (get("archived") or "").lower() in _TRUE)
            or (bool(section) and section.get("archived", False)),
            reachable=_REACHABLE.get(get("reachable") or ""),
            last_checked=dates.parse_into(checked, notes, "LAST_CHECKED") if checked else None,
            check_result=get("check_result") or None,
            where=f"line {self.link_line}",
            notes=notes,
            undated=added is None,
        )
        self.last = record
        self.records.append(record)


def read(
    document: str | TextIO | Iterable[str], *, base_url: str | None = None
) -> Iterator[Record]:
    """Records from the file's text (decoded by the caller, who knows its charset): the whole
    text, a text stream, or the text in pieces (`charset.html_text`)."""
    if isinstance(document, str):
        pieces: Iterator[str] = iter((document,))
    elif hasattr(document, "read"):
        stream = document
        pieces = iter(lambda: stream.read(1 << 18), "")
    else:
        pieces = iter(document)
    head = ""
    for piece in pieces:
        head += piece
        if len(head) >= HEAD:
            break
    lowered = head[:HEAD].lower()
    if "<a" not in lowered and "<dl" not in lowered:
        # Blank so far: any text further on makes it something else than a bookmark file.
        if head.strip() or any(piece.strip() for piece in pieces):
            raise FormatError("not a Netscape bookmark file (no <DL> or <A> elements)")
        return
    yield from _Reader(base_url).feed(itertools.chain((head,), pieces))


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


_SPECIAL = re.compile(r"[&<>\"']")
CHUNK = 1000  # entries per write: one call per chunk, not per line


def _escape(text: str) -> str:
    # Most titles, URLs and tags hold nothing to escape: one search instead of five replaces.
    return html.escape(text, quote=True) if _SPECIAL.search(text) else text


def _entry(bookmark: Bookmark, indent: str) -> str:
    attributes = [f'HREF="{_escape(bookmark.url)}"']
    if bookmark.added:
        attributes.append(f'ADD_DATE="{int(bookmark.added.timestamp())}"')
    if bookmark.last_visited:
        attributes.append(f'LAST_VISIT="{int(bookmark.last_visited.timestamp())}"')
    if bookmark.tags:
        attributes.append(f'TAGS="{_escape(",".join(bookmark.tags))}"')
    # marks' own fields, which browsers ignore and marks reads back (a lossless round trip).
    if bookmark.starred:
        attributes.append('STARRED="1"')
    if bookmark.archived:
        attributes.append('ARCHIVED="1"')
    if bookmark.visit_count or bookmark.last_visited:
        attributes.append(f'VISIT_COUNT="{bookmark.visit_count}"')
    if bookmark.reachable is not None:
        attributes.append(f'REACHABLE="{int(bookmark.reachable)}"')
    if bookmark.last_checked:
        attributes.append(f'LAST_CHECKED="{int(bookmark.last_checked.timestamp())}"')
    if bookmark.check_result:
        attributes.append(f'CHECK_RESULT="{_escape(bookmark.check_result)}"')
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
        lines: list[str] = []
        for bookmark in bookmarks:
            lines.append(_entry(bookmark, "    "))
            if len(lines) >= CHUNK:
                out.write("".join(lines))
                count += len(lines)
                lines.clear()
        out.write("".join(lines))
        count += len(lines)
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
    out.write("".join(_entry(bookmark, indent) for bookmark in node.get(None, [])))
    for name in sorted((key for key in node if key is not None), key=str.casefold):
        out.write(f"{indent}<DT><H3>{_escape(name)}</H3>\n{indent}<DL><p>\n")
        _write_folder(node[name], out, depth + 1)
        out.write(f"{indent}</DL><p>\n")
