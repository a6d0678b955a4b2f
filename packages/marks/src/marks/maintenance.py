"""Looking after the database: facts about it, near-duplicate merging, the search index."""

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import apsw

from marks import schema, urls
from marks.library import Library
from marks.store import Store

TRACKING = ("utm_", "fbclid", "gclid", "mc_cid", "mc_eid", "ref_src", "igshid")


def loose_key(url: str) -> str:
    """What makes two different URLs the same page to a person: http/https, `www.`, a trailing
    slash, tracking parameters and the fragment (`#page44`, `#!topic/x`) do not matter; nor does
    what url_key normalises (case, default port, percent-encoding)."""
    url = urls.key(url)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().removeprefix("www.")
    query = urlencode(
        [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if not k.lower().startswith(TRACKING)
        ]
    )
    path = parts.path.rstrip("/")
    scheme = "http" if parts.scheme.lower() in ("http", "https") else parts.scheme.lower()
    return urlunsplit((scheme, host, path, query, ""))


def info(library: Library) -> dict:
    store = library.store
    return {
        "path": store.path,
        "size_bytes": store.size_bytes,
        "schema_version": store.value("PRAGMA user_version"),
        "sqlite_version": apsw.sqlite_lib_version(),
        "bookmarks": library.count(),
        "tags": store.value("SELECT count(*) FROM tags"),
        "journal_mode": store.value("PRAGMA journal_mode"),
        # Bookmarks kept apart when a migration found them to be one page (db dedupe merges them).
        "url_key_collisions": store.value("SELECT count(*) FROM url_key_collisions"),
        # False: this SQLite has no FTS5, and `search --fts` falls back to substring search.
        "full_text_search": store.has_fts,
    }


def stats(library: Library) -> dict:
    value = library.store.value
    return {
        "bookmarks": library.count(),
        "starred": value("SELECT count(*) FROM bookmarks WHERE starred = 1"),
        "archived": value("SELECT count(*) FROM bookmarks WHERE archived = 1"),
        "unread": value("SELECT count(*) FROM bookmarks WHERE visit_count = 0"),
        "untagged": library.untagged_count(),
        "broken": value("SELECT count(*) FROM bookmarks WHERE reachable = 0"),
        "unchecked": value("SELECT count(*) FROM bookmarks WHERE reachable IS NULL"),
        "domains": value("SELECT count(DISTINCT domain) FROM bookmarks"),
        "tags": value("SELECT count(*) FROM tags"),
        "total_visits": value("SELECT coalesce(sum(visit_count), 0) FROM bookmarks"),
        "oldest": value("SELECT min(added) FROM bookmarks"),
        "newest": value("SELECT max(added) FROM bookmarks"),
    }


def schema_sql(library: Library) -> str:
    rows = library.store.execute(
        "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'bookmarks_fts_%' "
        "AND name NOT LIKE 'bookmarks_words_%' "
        "ORDER BY type = 'table' DESC, name"
    )
    return ";\n\n".join(row[0] for row in rows) + ";\n"


def vacuum(library: Library) -> tuple[int, int]:
    before = library.store.size_bytes
    library.store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    library.store.execute("VACUUM")
    library.store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return before, library.store.size_bytes


def duplicate_groups(library: Library) -> list[list[int]]:
    """Groups of bookmark ids that are the same page by `loose_key`, oldest first; the groups
    in the order of their first bookmark. SQLite groups the keys (its sorter spills to disk), so
    memory stays flat: a dict of every key held 400 MB at a million bookmarks."""
    library.store.db.create_scalar_function(
        "marks_loose_key", lambda url: loose_key(str(url)), 1, deterministic=True
    )
    rows = library.store.execute(
        "SELECT group_concat(id, ',' ORDER BY added, id) FROM "
        "(SELECT id, added, marks_loose_key(url) AS page FROM bookmarks) "
        "GROUP BY page HAVING count(*) > 1 ORDER BY min(id)"
    )
    return [[int(bookmark_id) for bookmark_id in ids.split(",")] for (ids,) in rows]


def merge_duplicates(library: Library, groups: list[list[int]]) -> int:
    """Keep the oldest of each group with every tag and the most visit data; delete the rest."""
    removed = 0
    with library.store.transaction():
        for keep_id, *others in groups:
            for other_id in others:
                library.merge_into(keep_id, library.get(other_id))
            library.delete(others)
            removed += len(others)
    return removed


def build_index(library: Library) -> int:
    library.store.require_full_text("cannot build the full-text index")
    with library.store.transaction():
        for index in ("bookmarks_fts", "bookmarks_words"):  # stemmed words, and prefixes
            library.store.execute(f"INSERT INTO {index} ({index}) VALUES ('rebuild')")
    return library.count()


def index_stats(library: Library) -> dict:
    store = library.store
    store.require_full_text("no full-text index to report on")
    for index in ("bookmarks_fts", "bookmarks_words"):
        store.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('integrity-check', 1)")
    pages = (
        store.value(
            "SELECT count(*) FROM dbstat WHERE name LIKE 'bookmarks_fts%' "
            "OR name LIKE 'bookmarks_words%'"
        )
        or 0
    )
    page_size = store.value("PRAGMA page_size")
    return {
        "indexed_rows": store.value("SELECT count(*) FROM bookmarks_fts_docsize"),
        "bookmarks": library.count(),
        "distinct_terms": store.value(
            "SELECT count(*) FROM (SELECT term FROM bookmarks_fts_vocab GROUP BY term)"
        )
        if _vocab(store)
        else None,
        "size_bytes": pages * page_size,
        "tokenizer": "porter unicode61 remove_diacritics 2",
        "prefix_tokenizer": "unicode61 remove_diacritics 2",
        "integrity": "ok",
        "schema_version": schema.VERSION,
    }


def _vocab(store: Store) -> bool:
    store.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.bookmarks_fts_vocab "
        "USING fts5vocab(main, bookmarks_fts, row)"
    )
    return True
