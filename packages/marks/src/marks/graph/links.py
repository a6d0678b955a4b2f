"""The seam to cached page content: links between bookmarks found in pages marks has cached.

The content cache is another module's table. This reads it only when it exists, through the
first table and columns below that the database has, so the graph works before the cache does
and never depends on its internals beyond (bookmark id, page text or HTML).
"""

import html
import re
from collections.abc import Iterator

from marks.store import Store

# (table, bookmark column, text columns in order of preference)
SOURCES = (
    ("content", "bookmark_id", ("html", "text", "body", "content")),
    ("page_content", "bookmark_id", ("html", "text", "body", "content")),
    ("bookmark_content", "bookmark_id", ("html", "text", "body", "content")),
)
MAX_LINKS_PER_PAGE = 500
_URL = re.compile(r"""https?://[^\s"'<>()\[\]{}\\^`|]+""", re.IGNORECASE)


def _source(store: Store) -> tuple[str, str, str] | None:
    for table, key, texts in SOURCES:
        columns = {row[1] for row in store.execute(f"PRAGMA table_info({table})")}
        if key in columns:
            for text in texts:
                if text in columns:
                    return table, key, text
    return None


def cached_links(store: Store) -> Iterator[tuple[int, str]]:
    """(bookmark id, absolute URL its cached page contains), at most MAX_LINKS_PER_PAGE each."""
    found = _source(store)
    if found is None:
        return
    table, key, text = found
    for bookmark_id, page in store.execute(
        f"SELECT {key}, {text} FROM {table} WHERE {text} IS NOT NULL"
    ):
        if isinstance(page, bytes):
            page = page.decode("utf-8", "replace")
        if not isinstance(page, str):
            continue
        seen: set[str] = set()
        for match in _URL.finditer(page):
            url = match.group(0).rstrip(".,;:!?")
            url = html.unescape(url) if "&" in url else url
            if url not in seen:
                seen.add(url)
                yield bookmark_id, url
                if len(seen) >= MAX_LINKS_PER_PAGE:
                    break
