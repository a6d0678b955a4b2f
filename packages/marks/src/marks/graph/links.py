"""Links between bookmarks found in cached pages (`content refresh` keeps them in page_content).

An HTML page's links are read from its stored original (`<a href>`, resolved against the page's
final URL, so relative links count); a PDF's or a text page's from the URLs written in its text.
"""

import re
import zlib
from collections.abc import Iterator
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from marks.store import Store

MAX_LINKS_PER_PAGE = 500
_URL = re.compile(r"""https?://[^\s"'<>()\[\]{}\\^`|]+""", re.IGNORECASE)


def _html_links(base: str, original: bytes) -> Iterator[str]:
    try:
        page = zlib.decompress(original)
    except zlib.error:
        return
    for node in HTMLParser(page).css("a[href]"):
        href = (node.attributes.get("href") or "").strip()
        if href and not href.startswith("#"):
            yield urljoin(base, href)


def _text_links(text: str) -> Iterator[str]:
    for match in _URL.finditer(text):
        yield match.group(0).rstrip(".,;:!?")


def cached_links(store: Store) -> Iterator[tuple[int, str]]:
    """(bookmark id, absolute URL its cached page links to), at most MAX_LINKS_PER_PAGE each."""
    rows = store.execute(
        "SELECT c.bookmark_id, c.url, c.kind, b.data, c.text FROM page_content c "
        "LEFT JOIN snapshot_blobs b ON b.sha256 = c.blob WHERE c.kind IN ('html', 'pdf', 'text')"
    )
    for bookmark_id, base, kind, original, text in rows:
        found = _html_links(base, original) if kind == "html" and original else _text_links(text)
        seen: set[str] = set()
        for url in found:
            if not url.lower().startswith(("http://", "https://")):
                continue
            if url not in seen:
                seen.add(url)
                yield bookmark_id, url
                if len(seen) >= MAX_LINKS_PER_PAGE:
                    break
