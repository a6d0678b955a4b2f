"""JSON: what `export json` writes (read back losslessly) and the JSON other producers write.

Shapes recognised: an array of bookmark objects (marks; Pinboard's `href`/`description`/
`extended`/`toread`/`shared`; Omnivore's `savedAt`/`labels`/`state`; linkding's `tag_names`/
`is_archived`/`unread`), an object holding such an array (`bookmarks`, `items`, `results`), a
Chrome `Bookmarks` file (`roots`) and a Firefox `bookmarks-*.json` backup (nested `children`).

Each item is decoded into a typed struct on its own: a field of the wrong type is dropped and
reported (the bookmark stays), an item without a usable URL is reported and skipped.

A top-level array (marks' export and most producers') is read in batches of about CHUNK bytes, so
memory does not grow with the file: a batch ends after an item (a `}` then `,` that decoding the
batch proves to end an item, not text in a string or a nested object). Objects (Chrome's
`Bookmarks`, Firefox's backup, `{"bookmarks": [...]}`), whose items sit at any depth, are streamed
as parser events by `jsontree`, an item at a time.
"""

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, NoReturn, TextIO

import msgspec

from marks.formats import FormatError, Record, dates
from marks.formats.netscape import PRIVATE_TAG, TOREAD_TAG
from marks.wire import Bookmark

_encoder = msgspec.json.Encoder()

Scalar = str | int | float | bool | None


class Item(msgspec.Struct, forbid_unknown_fields=False):
    """Every field name the producers above use, each with the types they write."""

    url: str | None = None
    href: str | None = None
    title: str | None = None
    name: str | None = None
    website_title: str | None = None
    description: str | None = None
    extended: str | None = None
    notes: str | None = None
    note: str | None = None
    excerpt: str | None = None
    tags: list[str] | str | None = None
    tag_names: list[str] | None = None
    labels: list[str | dict[str, Any]] | None = None
    folder: str | None = None
    starred: Scalar = None
    favorite: Scalar = None
    archived: Scalar = None
    is_archived: Scalar = None
    isArchived: Scalar = None  # Omnivore
    state: str | None = None
    toread: Scalar = None
    unread: Scalar = None
    shared: Scalar = None
    hash: str | None = None
    added: Scalar = None
    time: Scalar = None
    created: Scalar = None
    date_added: Scalar = None
    savedAt: Scalar = None
    time_added: Scalar = None
    last_visited: Scalar = None
    visit_count: int | None = None
    reachable: bool | None = None
    last_checked: Scalar = None
    check_result: str | None = None


class ChromeNode(msgspec.Struct):
    type: str = ""
    name: str = ""
    url: str | None = None
    date_added: str | int | None = None
    date_last_used: str | int | None = None
    children: list[Any] = []


class FirefoxNode(msgspec.Struct):
    type: str = ""
    title: str = ""
    uri: str | None = None
    root: str | None = None
    dateAdded: int | float | None = None  # microseconds since 1970
    tags: str | None = None
    annos: list[Any] = []
    children: list[Any] = []


def write(bookmarks: Iterable[Bookmark], out: TextIO) -> int:
    """Streams the array, one bookmark per line, so exports never hold the library in memory."""
    count = 0
    out.write("[")
    for bookmark in bookmarks:
        out.write(("\n" if count == 0 else ",\n") + _encoder.encode(bookmark).decode())
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


# --- reading -------------------------------------------------------------------------------------

_AT = re.compile(r"at `\$\.?([A-Za-z_][A-Za-z0-9_]*)")
TRUE = {"1", "true", "yes", "y", "on", "x", "*"}
FALSE = {"0", "false", "no", "n", "off", ""}


def _flag(value: Scalar, notes: list[str], name: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        return value != 0
    text = value.strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    notes.append(f"{name}: {value[:20]!r} is not yes or no, read as no")
    return False


def _convert(raw: Any, kind: type, where: str) -> tuple[Any, list[str]]:
    """The item as a typed struct; fields of a wrong type are dropped and noted."""
    notes: list[str] = []
    if not isinstance(raw, dict):
        raise _Skip(f"not an object but {_kind(raw)}")
    data = dict(raw)
    for _ in range(len(data) + 1):
        try:
            return msgspec.convert(data, kind, strict=False), notes
        except msgspec.ValidationError as error:
            match = _AT.search(str(error))
            field = match.group(1) if match else None
            if field is None or field not in data or field in ("url", "href", "uri"):
                raise _Skip(str(error)) from None
            notes.append(f"{field}: {str(error).split(' - at ')[0]}; ignored")
            del data[field]
    raise _Skip("unreadable item")


class _Skip(Exception):
    pass


def _tags(value: list[str] | str | None, separator: str = ",") -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # a separated string: empty pieces are spacing, not tags
        pieces = value.split(separator if separator != " " else None)
        return [piece for piece in pieces if piece.strip()]
    return list(value)


def _label_names(labels: list[str | dict[str, Any]] | None) -> list[str]:
    names = []
    for label in labels or []:
        name = label if isinstance(label, str) else label.get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def _item_record(item: Item, where: str, notes: list[str]) -> Record:
    pinboard = item.url is None and item.href is not None
    url = item.url if item.url is not None else item.href
    if url is None:
        raise _Skip("no url")
    tags = _tags(item.tags, " " if pinboard else ",")
    tags += item.tag_names or []
    tags += _label_names(item.labels)
    if item.folder:
        tags.append(item.folder)
    if pinboard:
        title, description = item.description or "", item.extended or ""
        if _flag(item.shared, notes, "shared") is False and item.shared is not None:
            tags.append(PRIVATE_TAG)
    else:
        title = item.title or item.name or item.website_title or ""
        description = item.description or item.extended or item.notes or item.note or ""
        description = description or item.excerpt or ""
    if _flag(item.toread, notes, "toread") or _flag(item.unread, notes, "unread"):
        tags.append(TOREAD_TAG)
    raw_added = next(
        (
            value
            for value in (
                item.added,
                item.time,
                item.created,
                item.date_added,
                item.savedAt,
                item.time_added,
            )
            if value not in (None, "")
        ),
        None,
    )
    added = dates.parse_into(raw_added, notes, "date")
    archived = (
        any(
            _flag(value, notes, "archived")
            for value in (item.archived, item.is_archived, item.isArchived)
        )
        or (item.state or "").lower() == "archived"
    )
    return Record(
        url=url,
        title=title,
        description=description,
        tags=tags,
        starred=_flag(item.starred, notes, "starred") or _flag(item.favorite, notes, "favorite"),
        archived=archived,
        added=added,
        last_visited=dates.parse_into(item.last_visited, notes, "last_visited"),
        visit_count=item.visit_count or 0,
        reachable=item.reachable,
        last_checked=dates.parse_into(item.last_checked, notes, "last_checked"),
        check_result=item.check_result,
        where=where,
        notes=notes,
        undated=added is None,
    )


def _bad(where: str, raw: Any, reason: str) -> Record:
    """An item that cannot be read: an invalid record, so the library reports it by position."""
    url = raw.get("url", raw.get("href", raw.get("uri"))) if isinstance(raw, dict) else None
    title = raw.get("title", raw.get("name")) if isinstance(raw, dict) else None
    return Record(
        url="",
        title=title if isinstance(title, str) else "",
        where=where,
        notes=[f"unreadable item ({reason})" + (f": {url}" if isinstance(url, str) else "")],
    )


def _items_from(data: list[Any], before: int = 0) -> Iterator[Record]:
    """The records of items numbered after `before`."""
    for number, raw in enumerate(data, before + 1):
        where = f"item {number}"
        try:
            item, notes = _convert(raw, Item, where)
            yield _item_record(item, where, notes)
        except _Skip as skip:
            yield _bad(where, raw, str(skip))


def chrome_record(node: ChromeNode, notes: list[str], path: list[str], where: str) -> Record:
    """A bookmark of a Chrome `Bookmarks` file, under its folders' names (`path`)."""
    try:
        added = dates.from_chrome(node.date_added) if node.date_added else None
        used = dates.from_chrome(node.date_last_used) if node.date_last_used else None
    except ValueError as error:
        notes.append(f"date: {error}")
        added = used = None
    return Record(
        url=node.url or "",
        title=node.name,
        tags=["/".join(_folder(p) for p in path)] if path else [],
        added=added,
        last_visited=used,
        visit_count=int(used is not None),
        where=where,
        notes=notes,
        undated=added is None,
    )


def _folder(name: str) -> str:
    from marks import tagnames

    return tagnames.from_folder(name)


def firefox_record(node: FirefoxNode, notes: list[str], path: list[str], where: str) -> Record:
    """A bookmark of a Firefox backup, under its folders' titles (`path`)."""
    added = dates.parse_into(node.dateAdded, notes, "dateAdded")
    description = ""
    for anno in node.annos:
        if isinstance(anno, dict) and anno.get("name") == "bookmarkProperties/description":
            description = str(anno.get("value") or "")
    tags = ["/".join(_folder(p) for p in path)] if path else []
    return Record(
        url=node.uri or "",
        title=node.title,
        description=description,
        tags=tags + [tag for tag in (node.tags or "").split(",") if tag.strip()],
        added=added,
        where=where,
        notes=notes,
        undated=added is None,
    )


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:8])
        return f"an object with keys {keys}" if keys else "an empty object"
    if isinstance(value, list):
        return "an array"
    return {str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


EXPECTED = (
    "expected a JSON array of bookmark objects (with `url` or `href`), an object holding one "
    "(`bookmarks`, `items`, `results`), a Chrome Bookmarks file (`roots`) or a Firefox backup "
    "(`type: text/x-moz-place-container`)"
)


class Exported(Record, forbid_unknown_fields=True, kw_only=True):
    """What `export json` writes, exactly: decoded straight into records (no field unknown)."""


CHUNK = 1 << 20  # bytes of an array decoded at a time
_exported = msgspec.json.Decoder(list[Exported])
_exported_item = msgspec.json.Decoder(Exported)
_typed_item = msgspec.json.Decoder(Item, strict=False)
_raw_items = msgspec.json.Decoder(list[msgspec.Raw])
_COMMA = re.compile(rb"\s*,")
_BYTE = re.compile(r"\(byte (\d+)\)")
TRIES = 4  # places tried as a batch's end before reading more


DEEP = "not valid JSON: nested too deeply"


def read(stream: BinaryIO) -> Iterator[Record]:
    """The records of a JSON file; FormatError (one line) for JSON nested deeper than the
    decoder (or the folder walk) can follow, rather than a RecursionError."""
    return _guarded(_read(stream))


def _guarded(records: Iterator[Record]) -> Iterator[Record]:
    try:
        yield from records
    except RecursionError:
        raise FormatError(DEEP) from None


def _read(stream: BinaryIO) -> Iterator[Record]:
    head = b""
    while not head.strip():
        more = stream.read(CHUNK)
        if not more:
            break
        head += more
    if head.lstrip()[:1] == b"[":
        yield from _array(head, stream)
        return
    if head.lstrip()[:1] == b"{":
        from marks.formats import jsontree

        yield from jsontree.read(stream, head)
        return
    raw = head + stream.read()  # a scalar, or not JSON: nothing to stream
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        raise FormatError(f"not valid JSON: {error}") from None
    raise FormatError(f"{EXPECTED}; found {_kind(data)}")


def _array(head: bytes, stream: BinaryIO) -> Iterator[Record]:
    """The records of a top-level array, a batch of items at a time."""
    start = head.index(b"[") + 1
    buffer, offset = head[start:], start  # `offset`: where `buffer` starts in the file
    number = 0  # items read so far
    ended = False
    while not ended:
        # Read as much again as is held: a batch that cannot end yet is decoded again, so the
        # work stays linear even for an item larger than CHUNK.
        more = stream.read(max(CHUNK, len(buffer)))
        ended = not more
        buffer += more
        if ended:
            records = _batch(b"[" + buffer, number)  # the closing `]` is in the buffer
            if records is None:
                _invalid(b"[" + buffer, offset - 1)
        else:
            cut, records = _cut(buffer, number)
            if records is None:
                continue
            buffer, offset = buffer[cut + 1 :], offset + cut + 1  # after the comma
        number += len(records)
        records.reverse()  # popped from the end: each record is let go once handed on
        while records:
            yield records.pop()


def _cut(buffer: bytes, number: int) -> tuple[int, list[Record] | None]:
    """The last place in `buffer` where an item ends and a comma follows, and the records of the
    items before it; (0, None) if none is found among the last few `},`."""
    end = len(buffer)
    for _ in range(TRIES):
        close = buffer.rfind(b"}", 0, end)
        if close < 0:
            break
        end = close
        comma = _COMMA.match(buffer, close + 1)
        if comma is None:
            continue
        records = _batch(b"[" + buffer[: close + 1] + b"]", number)
        if records is not None:
            return comma.end() - 1, records
    return 0, None


def _batch(data: bytes, number: int) -> list[Record] | None:
    """The records of `data`, a JSON array of whole items, numbered after `number`; None when
    `data` is not one (cut inside a string or a nested object, or not JSON)."""
    try:  # the common case: marks' own export, every item decoded straight into a record
        return [
            _exported_record(record, number + index)
            for index, record in enumerate(_exported.decode(data), 1)
        ]
    except msgspec.ValidationError:
        pass  # some item is not our export's: each item is read on its own below
    except msgspec.DecodeError:
        return None
    try:
        items = _raw_items.decode(data)
    except msgspec.DecodeError:
        return None
    return [_item(item, number + index) for index, item in enumerate(items, 1)]


def _invalid(data: bytes, offset: int) -> NoReturn:
    """FormatError for what is not JSON, at the byte of the file where it failed."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        message = _BYTE.sub(lambda m: f"(byte {int(m.group(1)) + offset})", str(error))
        raise FormatError(f"not valid JSON: {message}") from None
    raise FormatError("not valid JSON")  # unreachable: `data` failed to decode as an array


def _exported_record(record: Exported, number: int) -> Record:
    record.where = f"item {number}"
    record.undated = record.added is None
    for name in ("added", "last_visited", "last_checked"):
        moment = getattr(record, name)
        if moment is not None and moment.tzinfo is None:  # no zone written: UTC
            setattr(record, name, moment.replace(tzinfo=dt.UTC))
    return record


def _item(raw: msgspec.Raw, number: int) -> Record:
    """One item, read the first way that reads it: as our export writes it, as a typed `Item`,
    or field by field (a field of the wrong type dropped and noted)."""
    try:
        return _exported_record(_exported_item.decode(raw), number)
    except msgspec.ValidationError:
        pass
    where = f"item {number}"
    try:
        item = _typed_item.decode(raw)
    except msgspec.ValidationError:
        value = msgspec.json.decode(raw)
        try:
            converted, notes = _convert(value, Item, where)
            return _item_record(converted, where, notes)
        except _Skip as skip:
            return _bad(where, value, str(skip))
    try:
        return _item_record(item, where, [])
    except _Skip as skip:
        return _bad(where, msgspec.to_builtins(item), str(skip))
