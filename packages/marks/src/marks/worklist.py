"""A worklist of (bookmark id, URL) pairs in a temporary table, read back a page at a time.

Link checks and page refreshes plan their bookmarks into a temp table first (one query, whatever
the selection), then stream it: 100,000 URLs never sit in memory at once, and no cursor stays open
across the network work.
"""

from collections.abc import Iterator

from marks.store import Store

PAGE = 500


def rows(store: Store, table: str) -> Iterator[tuple[int, str]]:
    """(bookmark id, url) of `table` (seq, bookmark_id, url) in plan order, PAGE rows at a time."""
    last = 0
    while True:
        page = list(
            store.execute(
                f"SELECT seq, bookmark_id, url FROM {table} WHERE seq > ? ORDER BY seq LIMIT ?",
                (last, PAGE),
            )
        )
        if not page:
            return
        for seq, bookmark_id, url in page:
            last = seq
            yield bookmark_id, url
