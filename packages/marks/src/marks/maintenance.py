"""Looking after the database: facts about it, near-duplicate merging, the search index."""

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import apsw

from marks import pagestore, schema, urls
from marks.library import Invalid, Library
from marks.listing import DOMAINS
from marks.store import Store

# What `Library.merge_into` may change on the bookmark kept (undo puts them back).
MERGED_FIELDS = (
    "added",
    "last_visited",
    "visit_count",
    "title",
    "description",
    "starred",
    "archived",
)
TRACKING = ("utm_", "fbclid", "gclid", "mc_cid", "mc_eid", "ref_src", "igshid")


def loose_key(url: str) -> str:
    """What makes two different URLs the same page to a person: http/https, `www.`, a trailing
    slash, tracking parameters and the fragment (`#page44`, `#!topic/x`) do not matter; nor does
    what url_key normalises (case, default port, percent-encoding)."""
    fast = urls.plain(url)  # most URLs: no urlsplit (dedupe keys every bookmark of the library)
    if fast is not None:
        _, key, host = fast
        path = key[key.index("/", key.index("//") + 2) :].partition("#")[0]
        if "?" not in path:  # a query is decoded and encoded again below: not here
            return "http://" + host + path.rstrip("/")
    return _general_loose_key(url)


def _general_loose_key(url: str) -> str:
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
        # Kept pages (snapshots and content originals) live in this file, each body once.
        "snapshots": store.value("SELECT count(*) FROM snapshots"),
        "stored_pages_bytes": store.value(
            "SELECT coalesce(sum(length(data)), 0) FROM snapshot_blobs"
        ),
    }


def stats(library: Library) -> dict:
    """Counts about the library, each read from an index (the web UI's sidebar asks for them on
    every visit): what most bookmarks are (unread, never checked) is counted as every bookmark
    less the others, which are few (`visit_count` is never negative, `reachable` 0, 1 or NULL)."""
    value = library.store.value
    bookmarks = library.count()
    # One pass over the visited third of the visit_count index for both.
    visited, visits = library.store.one(
        "SELECT count(*), coalesce(sum(visit_count), 0) FROM bookmarks WHERE visit_count > 0"
    ) or (0, 0)
    return {
        "bookmarks": bookmarks,
        "starred": value("SELECT count(*) FROM bookmarks WHERE starred = 1"),
        "archived": value("SELECT count(*) FROM bookmarks WHERE archived = 1"),
        "unread": bookmarks - visited,
        "untagged": library.untagged_count(),
        "broken": value("SELECT count(*) FROM bookmarks WHERE reachable = 0"),
        "unchecked": bookmarks
        - value("SELECT count(*) FROM bookmarks WHERE reachable IS NOT NULL"),
        # The kept domains (`listing.DOMAINS`, schema 14), and the empty domain (a URL without
        # a host), which count(DISTINCT domain) counted too.
        "domains": value(
            f"{DOMAINS} SELECT count(domain) + "
            "EXISTS (SELECT 1 FROM bookmarks WHERE domain = '') FROM d"
        ),
        "tags": value("SELECT count(*) FROM tags"),
        "total_visits": visits,
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
    with library.store.transaction():
        pagestore.collect(library.store)  # page bodies nothing refers to any more
    library.store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    library.store.execute("VACUUM")
    library.store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return before, library.store.size_bytes


def _loose_key(*values: "apsw.SQLiteValue") -> str:
    return loose_key(str(values[0]))  # registered with one argument


def duplicate_groups(library: Library) -> list[list[int]]:
    """Groups of bookmark ids that are the same page by `loose_key`, oldest first; the groups
    in the order of their first bookmark. SQLite groups the keys (its sorter spills to disk), so
    memory stays flat: a dict of every key held 400 MB at a million bookmarks."""
    library.store.db.create_scalar_function("marks_loose_key", _loose_key, 1, deterministic=True)
    rows = library.store.execute(
        "SELECT group_concat(id, ',' ORDER BY added, id) FROM "
        "(SELECT id, added, marks_loose_key(url) AS page FROM bookmarks) "
        "GROUP BY page HAVING count(*) > 1 ORDER BY min(id)"
    )
    return [[int(bookmark_id) for bookmark_id in ids.split(",")] for (ids,) in rows]


def merge_duplicates(library: Library, groups: list[list[int]]) -> int:
    """Keep the oldest of each group with every tag and the most visit data; delete the rest."""
    removed = 0
    with library.undoable("dedupe"):
        library.before([group[0] for group in groups], MERGED_FIELDS)
        for keep_id, *others in groups:
            for other_id in others:
                library.merge_into(keep_id, library.get(other_id))
            library.delete(others)
            removed += len(others)
        library.said(f"merged {removed} duplicate(s) into {len(groups)} bookmark(s)")
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


def backup(library: Library, target: Path) -> int:
    """A consistent copy of the whole database (snapshots and page bodies included: they live in
    it) while others may write, through SQLite's online backup; written beside `target` and
    renamed, so `target` is whole or untouched. Answers the copy's size in bytes."""
    target = Path(target)
    if target.is_dir():
        raise Invalid(f"{target} is a directory")
    if not target.parent.is_dir():
        raise Invalid(f"directory {target.parent} does not exist")
    fd, temporary = tempfile.mkstemp(prefix=".marks-backup-", suffix=".db", dir=target.parent)
    os.close(fd)
    try:
        copy = apsw.Connection(temporary)
        try:
            with copy.backup("main", library.store.db, "main") as job:
                job.step(-1)
            copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            copy.close()
        os.chmod(temporary, 0o600)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target.stat().st_size


def integrity(library: Library) -> dict:
    """SQLite's own check, foreign keys, and every kept page body against its SHA-256."""
    store = library.store
    sqlite = [row[0] for row in store.execute("PRAGMA integrity_check")]
    foreign = [
        f"{table} row {rowid}: no {parent} it refers to"
        for table, rowid, parent, _ in store.execute("PRAGMA foreign_key_check")
    ]
    pages = pagestore.check(store)
    problems = ([] if sqlite == ["ok"] else sqlite) + foreign + pages
    return {
        "integrity": "ok" if not problems else "problems",
        "sqlite": "ok" if sqlite == ["ok"] else "; ".join(sqlite[:20]),
        "foreign_keys": "ok" if not foreign else f"{len(foreign)} problem(s)",
        "snapshots": store.value("SELECT count(*) FROM snapshots"),
        "stored_pages": store.value("SELECT count(*) FROM snapshot_blobs"),
        "stored_pages_checked": "ok" if not pages else f"{len(pages)} problem(s)",
        "problems": problems,
    }
