"""Archived copies of dead links: the Wayback Machine's availability API.

For each confirmed-broken bookmark, the API is asked for the capture closest to the day the
bookmark was added (`?url=...&timestamp=YYYYMMDD`); its documented answer is
`{"archived_snapshots": {"closest": {"available": true, "url": ..., "timestamp":
"YYYYMMDDhhmmss", "status": "200"}}}`, or an empty `archived_snapshots` when there is none. A
capture is kept only if it was a success (status 2xx) and its URL is a web address (an answer is
data from elsewhere: never a `javascript:` link in the web UI). The requests follow the rules of
every fetch of marks (`webclient`): the API's own address is the user's choice (the config).
"""

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

import aiohttp
import msgspec

from marks import clock, urls, webclient
from marks.library import Library

MAX_ANSWER = 64 * 1024  # the API's answer is a few hundred bytes


class Closest(msgspec.Struct):
    available: bool = False
    url: str = ""
    timestamp: str = ""
    status: str = ""


class Snapshots(msgspec.Struct):
    closest: Closest | None = None


class Answer(msgspec.Struct):
    archived_snapshots: Snapshots = msgspec.field(default_factory=Snapshots)


_decode = msgspec.json.Decoder(Answer).decode


@dataclass
class Found:
    bookmark_id: int
    url: str | None = None  # the capture, or None
    at: dt.datetime | None = None
    error: str = ""  # why none was found, when the API could not say


def capture(answer: bytes) -> tuple[str, dt.datetime] | None:
    """The capture an API answer names, if it is one marks keeps."""
    closest = _decode(answer).archived_snapshots.closest
    if closest is None or not closest.available or not closest.status.startswith("2"):
        return None
    if not urls.openable(closest.url):
        return None
    try:
        at = dt.datetime.strptime(closest.timestamp[:14], "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return closest.url, at


async def _ask(
    session: aiohttp.ClientSession, api: str, bookmark_id: int, url: str, added: dt.datetime | None
) -> Found:
    query = {"url": url, **({"timestamp": added.strftime("%Y%m%d")} if added else {})}
    found = Found(bookmark_id)
    try:
        async with session.get(f"{api}?{urlencode(query)}") as answer:
            if answer.status != 200:
                found.error = f"the API answered HTTP {answer.status}"
                return found
            body, too_large = await webclient.read_capped(answer, MAX_ANSWER)
        if too_large:
            found.error = "the API's answer is too large"
            return found
        kept = capture(body)
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        found.error = str(error) or type(error).__name__
        return found
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        found.error = "the API's answer is not its documented JSON"
        return found
    if kept is not None:
        found.url, found.at = kept
    return found


def look_up(
    library: Library,
    ids: list[int],
    api: str,
    timeout: float = 10.0,
    on_found: Callable[[Found], None] = lambda found: None,
) -> list[Found]:
    """Ask the API about each bookmark and store each capture found (`archived_url`)."""
    bookmarks = library.get_many(ids)

    async def all_of() -> list[Found]:
        settings = webclient.ClientSettings(concurrency=4, per_host=4, timeout=timeout)
        async with webclient.session(settings) as session:
            return await asyncio.gather(
                *(_ask(session, api, b.id, b.url, b.added) for b in bookmarks)
            )

    results = asyncio.run(all_of())
    with library.store.transaction():
        for found in results:
            if found.url is not None:
                library.store.execute(
                    "UPDATE bookmarks SET archived_url = ?, archived_at = ? WHERE id = ?",
                    (found.url, clock.to_text(found.at), found.bookmark_id),
                )
    for found in results:
        on_found(found)
    return results
