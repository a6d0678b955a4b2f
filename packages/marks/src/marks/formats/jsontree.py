"""JSON files whose top level is an object, read as a stream of parser events (ijson's C
parser): a Chrome `Bookmarks` file (`roots`), a Firefox backup (nested `children`) and an object
holding an array of items (`bookmarks`, `items`, `results`, `data`). Memory holds one item and
the folders around it, never the document (a 90 MB Chrome file was read whole and peaked at
2.4 GB).

Two passes over the file: Chrome writes a folder's `name` after its `children`, so the first pass
learns each folder's name, kind and shape by its place (its number among the file's objects),
and the second yields the bookmarks in order with their folders as tags. A stream that cannot be
read twice (stdin) is spooled to a temporary file first. Items are numbered as a whole read
numbered them, and each is converted by the same code (`jsonfile`).
"""

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO

import ijson  # type: ignore[import-untyped]  # ships no type information

from marks.formats import FormatError, Record, jsonfile

ITEM_KEYS = ("bookmarks", "items", "results", "data")
_SCALARS = frozenset({"string", "number", "boolean", "null"})
Events = Iterator[tuple[str, Any]]


def _build(events: Events, event: str, value: Any) -> Any:
    """The value that starts with (event, value), built whole (an item's own fields)."""
    if event in _SCALARS:
        return value
    if event == "start_map":
        built: dict[str, Any] = {}
        for event, value in events:
            if event == "end_map":
                return built
            key = value
            built[key] = _build(events, *next(events))
        return built
    items: list[Any] = []
    for event, value in events:
        if event == "end_array":
            return items
        items.append(_build(events, event, value))
    return items


def _skip(events: Events, event: str) -> None:
    """Past the value that starts with `event`, building nothing."""
    if event in _SCALARS:
        return
    depth = 1
    for event, _ in events:
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return


_FOLDER_FIELDS = ("type", "name", "title", "root", "url", "uri")


class Folder:
    """What the first pass learned of an object with `children`: walk them (under `label`, if
    any), or report the object as unreadable (`bad`), or leave them."""

    __slots__ = ("bad", "label", "walk")

    def __init__(self, walk: bool, label: str, bad: str | None) -> None:
        self.walk, self.label, self.bad = walk, label, bad


class _Walk:
    """One pass over the events. Objects with `children` are numbered in document order
    (`seen`); the first pass keeps a few fields of each (`found`), the second reads its
    `Folder` (`folders`) and yields records. A node is an object inside a `children` array (or
    Firefox's root object): its own fields are built, its children walked as they come."""

    def __init__(self, events: Events, kind: str = "", folders: dict[int, Folder] | None = None):
        self.events = events
        self.kind = kind  # "chrome", "firefox" or an ITEM_KEYS key; "" in the first pass
        self.folders = folders or {}
        self.found: dict[int, dict[str, Any]] = {}
        self.first = folders is None
        self.seen = 0
        self.where = 0  # the item numbers a whole read gave
        self.top: dict[str, Any] = {}  # the top level's scalars
        self.keys: list[str] = []  # the top level's keys (for the error message)
        self.roots = self.children = False
        self.arrays: list[str] = []  # ITEM_KEYS holding arrays, in file order

    # --- the top-level object ---------------------------------------------------------------------

    def document(self) -> Iterator[Record]:
        event, _ = next(self.events, ("", None))
        if event != "start_map":
            raise FormatError("not valid JSON: expected an object")
        firefox = self.kind == "firefox"
        yield from self.node([], counted=firefox, top=True)

    def top_value(self, key: str, event: str, value: Any, path: list[str]) -> Iterator[Record]:
        """A value of the top-level object: the roots, an array of items, or skipped."""
        if len(self.keys) < 8:
            self.keys.append(key)
        if key == "roots" and event == "start_map":
            self.roots = True
            yield from self.chrome_roots()
        elif key in ITEM_KEYS and event == "start_array":
            if key not in self.arrays:
                self.arrays.append(key)
            yield from self.items(self.kind == key)
        elif event in _SCALARS:
            self.top[key] = value
        else:
            _skip(self.events, event)

    def chrome_roots(self) -> Iterator[Record]:
        """`roots`: each root's children are walked without a folder tag (the browser's own)."""
        for event, _value in self.events:
            if event == "end_map":
                return
            event, _ = next(self.events)
            if event != "start_map":
                _skip(self.events, event)
                continue
            for inner, key in self.events:
                if inner == "end_map":
                    break
                event, _value = next(self.events)
                if key == "children" and event == "start_array":
                    yield from self.array([], self.kind == "chrome")
                else:
                    _skip(self.events, event)

    def items(self, wanted: bool) -> Iterator[Record]:
        """The array of `{"bookmarks": [...]}`: each element read as jsonfile reads an item."""
        number = 0
        for event, value in self.events:
            if event == "end_array":
                return
            if not wanted:
                _skip(self.events, event)
                continue
            number += 1
            raw = _build(self.events, event, value)
            yield from jsonfile._items_from([raw], number - 1)

    # --- folders and bookmarks ---------------------------------------------------------------

    def node(self, path: list[str], counted: bool, top: bool = False) -> Iterator[Record]:
        """After a node's `start_map`: its fields, its children walked or skipped."""
        self.seen += 1
        ordinal = self.seen
        if counted:
            self.where += 1
        where = f"item {self.where}"
        known = self.folders.get(ordinal)
        if known is not None and known.bad is not None:
            if counted:
                yield jsonfile._bad(where, {}, known.bad)
            counted = False  # a bad folder's children were never read: not numbered
        walk = known is not None and known.walk and known.bad is None
        fields: dict[str, Any] = {}
        children = False
        for event, value in self.events:
            if event == "end_map":
                break
            key = value
            event, value = next(self.events)
            if key == "children" and event == "start_array":
                children = True
                if top:
                    self.children = True
                inner = [*path, known.label] if walk and known and known.label else path
                yield from self.array(inner, counted and walk)
            elif top:
                yield from self.top_value(key, event, value, path)
                if event in _SCALARS:
                    fields[key] = value
            else:
                fields[key] = _build(self.events, event, value)
        if children and self.first:
            self.found[ordinal] = {k: fields[k] for k in _FOLDER_FIELDS if k in fields}
        if self.first or not counted or (children and walk):
            return
        yield from self.leaf(fields, path, where)

    def array(self, path: list[str], counted: bool) -> Iterator[Record]:
        for event, value in self.events:
            if event == "end_array":
                return
            if event == "start_map":
                yield from self.node(path, counted)
                continue
            raw = _build(self.events, event, value)
            if counted:
                self.where += 1
                yield jsonfile._bad(
                    f"item {self.where}", raw, f"not an object but {jsonfile._kind(raw)}"
                )

    def leaf(self, fields: dict[str, Any], path: list[str], where: str) -> Iterator[Record]:
        kind = jsonfile.ChromeNode if self.kind == "chrome" else jsonfile.FirefoxNode
        try:
            node, notes = jsonfile._convert(fields, kind, where)
        except jsonfile._Skip as skip:
            yield jsonfile._bad(where, fields, str(skip))
            return
        if isinstance(node, jsonfile.ChromeNode):
            if node.type == "url":
                yield jsonfile.chrome_record(node, notes, path, where)
        elif node.type == "text/x-moz-place" and node.uri is not None:
            yield jsonfile.firefox_record(node, notes, path, where)

    # --- after the first pass -------------------------------------------------------------------

    def shape(self) -> str:
        if self.roots:
            return "chrome"
        if self.top.get("type") == "text/x-moz-place-container" or (
            self.top.get("root") and self.children
        ):
            return "firefox"
        for key in ITEM_KEYS:
            if key in self.arrays:
                return key
        shown = ", ".join(self.keys)
        found = f"an object with keys {shown}" if shown else "an empty object"
        raise FormatError(f"{jsonfile.EXPECTED}; found {found}")

    def learned(self, kind: str) -> dict[int, Folder]:
        folders = {}
        struct = jsonfile.ChromeNode if kind == "chrome" else jsonfile.FirefoxNode
        for ordinal, fields in self.found.items():
            try:
                node, _ = jsonfile._convert(fields, struct, "")
            except jsonfile._Skip as skip:
                folders[ordinal] = Folder(False, "", str(skip))
                continue
            if isinstance(node, jsonfile.ChromeNode):
                folders[ordinal] = Folder(node.type == "folder", node.name.strip(), None)
            else:
                label = "" if node.root else node.title.strip()
                folders[ordinal] = Folder(node.type == "text/x-moz-place-container", label, None)
        return folders


def _events(stream: BinaryIO) -> Events:
    try:
        yield from ijson.basic_parse(stream, use_float=True)
    except ijson.JSONError as error:
        raise FormatError(f"not valid JSON: {error}") from None


def read(stream: BinaryIO, head: bytes) -> Iterator[Record]:
    """The records of a JSON object file whose first bytes, already read from `stream`, are
    `head`."""
    if stream.seekable():
        yield from _passes(stream, stream.tell() - len(head))
        return
    with tempfile.TemporaryFile() as spool:
        spool.write(head)
        shutil.copyfileobj(stream, spool, 1 << 20)
        yield from _passes(spool, 0)


def _passes(file: BinaryIO, start: int) -> Iterator[Record]:
    file.seek(start)
    first = _Walk(_events(file))
    for _ in first.document():
        pass
    kind = first.shape()
    file.seek(start)
    second = _Walk(
        _events(file), kind, first.learned(kind) if kind in ("chrome", "firefox") else {}
    )
    yield from second.document()
