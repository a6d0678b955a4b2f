"""Title and description for a bookmark just added, from its page (what `bookmark add` does when
no title is given). Offline is not an error: the bookmark stays, with a note saying why it has no
title.

Enrichers are plain callables `(Bookmark, Extracted | None) -> dict of changes`, asked in order
after the page is read: the seam through which `bookmark_enricher` plugins take part.
"""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp

from marks import extract, webclient
from marks.library import Library
from marks.wire import Bookmark

TIMEOUT = 5.0
MAX_BYTES = 1024 * 1024  # the title and description are in the head
Enricher = Callable[[Bookmark, extract.Extracted | None], dict]


@dataclass
class Enriched:
    bookmark: Bookmark
    note: str = ""  # why nothing was fetched, for stderr


async def _read(url: str, timeout: float) -> extract.Extracted:
    settings = webclient.ClientSettings(concurrency=1, per_host=1, timeout=timeout)
    async with webclient.session(settings) as session, session.get(url) as response:
        if response.status >= 400:
            raise LookupError(f"the page answered HTTP {response.status}")
        if extract.kind_of(response.content_type.lower(), url) != "html":
            return extract.Extracted()
        body, _ = await webclient.read_capped(response, MAX_BYTES)
        return extract.html_meta(extract.decode(body, response.charset))


def fetch(url: str, timeout: float = TIMEOUT) -> tuple[extract.Extracted | None, str]:
    """The page's title and description, or None and the reason."""
    try:
        return asyncio.run(_read(url, timeout)), ""
    except (TimeoutError, aiohttp.ServerTimeoutError):
        return None, f"no answer in {timeout:g} s"
    except aiohttp.ClientConnectorError as error:
        return None, f"cannot connect ({error.os_error.strerror or error.os_error})"
    except (aiohttp.ClientError, OSError, LookupError, ValueError) as error:
        return None, str(error) or type(error).__name__


def enrich(
    library: Library,
    bookmark: Bookmark,
    *,
    timeout: float = TIMEOUT,
    enrichers: Sequence[Enricher] = (),
) -> Enriched:
    """Fill the empty title and description of a new bookmark from its page."""
    if not bookmark.url.lower().startswith(("http://", "https://")):
        return Enriched(bookmark)  # nothing to fetch (file:, ftp:, javascript: ...)
    found, note = fetch(bookmark.url, timeout)
    changes: dict = {}
    if found is not None:
        if not bookmark.title and found.title:
            changes["title"] = found.title
        if not bookmark.description and found.description:
            changes["description"] = found.description
    for enricher in enrichers:
        changes.update(enricher(bookmark, found) or {})
    if changes:
        bookmark = library.update(bookmark.id, **changes)
    if note:
        note = f"no title fetched for {bookmark.url}: {note}"
    return Enriched(bookmark, note)
