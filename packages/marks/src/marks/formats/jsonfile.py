"""JSON: an array of bookmark objects with every field (what `export json` writes), read back
losslessly. Objects from other tools are accepted when they have at least a `url` (or `href`)."""

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import BinaryIO, TextIO

import msgspec

from marks import clock
from marks.formats import FormatError
from marks.library import Record
from marks.wire import Bookmark

_encoder = msgspec.json.Encoder()


def write(bookmarks: Iterable[Bookmark], out: TextIO) -> int:
    """Streams the array, one bookmark per line, so exports never hold the library in memory."""
    count = 0
    out.write("[")
    for bookmark in bookmarks:
        out.write(("\n" if count == 0 else ",\n") + _encoder.encode(bookmark).decode())
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def _tags(value: object) -> list[str]:
    if isinstance(value, str):
        return [tag for tag in value.split(",") if tag.strip()]
    if isinstance(value, list):
        return [str(tag) for tag in value]
    return []


def _time(value: object) -> dt.datetime | None:
    if isinstance(value, int | float):
        return clock.from_epoch(value)
    if isinstance(value, str) and value:
        try:
            return clock.parse_user_date(value)
        except ValueError:
            return clock.from_epoch(value)
    return None


def read(stream: BinaryIO) -> Iterator[Record]:
    try:
        data = msgspec.json.decode(stream.read())
    except msgspec.DecodeError as error:
        raise FormatError(f"not valid JSON: {error}") from None
    if isinstance(data, dict):
        data = data.get("bookmarks", data.get("items"))
    if not isinstance(data, list):
        raise FormatError("expected a JSON array of bookmark objects")
    for number, item in enumerate(data, 1):
        url = item.get("url", item.get("href")) if isinstance(item, dict) else None
        if not isinstance(url, str):
            raise FormatError(f"item {number} is not a bookmark object with a url")
        yield Record(
            url=url,
            title=str(item.get("title") or item.get("name") or ""),
            description=str(item.get("description") or item.get("extended") or ""),
            tags=_tags(item.get("tags")),
            starred=bool(item.get("starred", False)),
            archived=bool(item.get("archived", False)),
            added=_time(item.get("added", item.get("time"))),
            last_visited=_time(item.get("last_visited")),
            visit_count=int(item.get("visit_count") or 0),
            reachable=item.get("reachable") if isinstance(item.get("reachable"), bool) else None,
            last_checked=_time(item.get("last_checked")),
            check_result=item.get("check_result")
            if isinstance(item.get("check_result"), str)
            else None,
        )
