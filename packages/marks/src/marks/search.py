"""Search as SQL: the query tree of `marks.query` as statements over the full-text indexes, and
plain substring search.

Two FTS5 indexes hold the same columns (schema migrations 1 and 3): `bookmarks_fts` is stemmed
(porter), so `running` finds "run"; `bookmarks_words` is not, so a prefix `programm*` matches words
as written ("Programming"), which the stemmed index cannot (it holds "program"). Every word or
phrase goes to the stemmed index, every prefix to the unstemmed one. User text is always quoted,
so no user text is FTS5 syntax. Tags and stand-alone negations become SQL. Results are ranked by
BM25 with the title weighted highest (the sum over both indexes), and carry a snippet; a query
of one FTS5 expression ranks its newest RANKED_HITS hits, the older follow unranked.

Without FTS5 (see `marks.store`) the same query tree becomes substring matches (`query_substring`).
"""

import json
from collections.abc import Iterable
from typing import Any

from marks.query import FIELDS, And, Node, Not, Or, QueryError, Tag, Text, parse, quote_words
from marks.rows import NAMES, qualified
from marks.rows import to_bookmark as row_to_bookmark
from marks.tagnames import key as tag_key
from marks.wire import SearchHit

__all__ = [
    "FIELDS",
    "QueryError",
    "SearchResults",
    "full_text",
    "parse",
    "query_substring",
    "quote_words",
    "substring",
]

STEMMED, WORDS = "bookmarks_fts", "bookmarks_words"
WEIGHTS = "10.0, 3.0, 2.0, 5.0"  # title, description, url, tags (same columns in both indexes)
QUALIFIED = qualified("b")
WIDTH = len(NAMES)  # a row's bookmark columns; the rank follows them
SUBSTRING_COLUMNS = ("title", "url", "description", "tags")
# How many hits BM25 ranks: the newest this many, in rowid order (the order FTS5 keeps its hits
# in). FTS5's bm25() reads each hit's column sizes and positions, about 0.6 us a hit on the
# project's machine, so a word in a fifth of a million bookmarks took 100 ms or more to rank; a
# query with fewer hits than this ranks all of them, exactly as before. Past it, the
# best-scored of the newest hits lead and the older hits follow newest first, unranked: a word
# that common has thousands of hits scoring within a few percent of each other (at a million,
# the 50th best of the newest 10,000 `kernel` hits scores within 2% of the 50th best of all
# 187,106), so the newest of the best is what the page shows.
RANKED_HITS = 10_000


class SearchResults(list[SearchHit]):
    """The hits, best first, and how they were found: `full_text` when FTS5 ranked them;
    `fallback`, when not None, is the one line a front end shows (full-text search was asked for
    and substring search ran)."""

    def __init__(
        self,
        hits: Iterable[SearchHit] = (),
        *,
        full_text: bool = False,
        fallback: str | None = None,
    ) -> None:
        super().__init__(hits)
        self.full_text = full_text
        self.fallback = fallback


def _table(node: Text) -> str:
    return WORDS if node.prefix else STEMMED


def _leaf(node: Text) -> str:
    quoted = '"' + node.words.replace('"', '""') + '"'
    if node.prefix:
        quoted += " *"
    return f"{node.field} : {quoted}" if node.field else quoted


def _fts(node: Node) -> tuple[str, str] | None:
    """(index, FTS5 expression) when the node is one expression over one index, else None (it
    needs SQL: tags, a bare negation, or words and prefixes mixed under one operator)."""
    if isinstance(node, Text):
        return _table(node), _leaf(node)
    if isinstance(node, Or):
        parts = [_fts(child) for child in node.children]
        tables = {part[0] for part in parts if part is not None}
        if None in parts or len(tables) != 1:
            return None
        return tables.pop(), "(" + " OR ".join(part[1] for part in parts if part) + ")"
    if isinstance(node, And):
        positive = [_fts(c) for c in node.children if not isinstance(c, Not)]
        negative = [_fts(c.child) for c in node.children if isinstance(c, Not)]
        every = positive + negative
        tables = {part[0] for part in every if part is not None}
        if not positive or None in every or len(tables) != 1:
            return None
        expression = "(" + " AND ".join(part[1] for part in positive if part) + ")"
        for part in negative:
            assert part is not None
            expression = f"({expression} NOT {part[1]})"
        return tables.pop(), expression
    return None


def _sql(node: Node, bindings: list[Any]) -> str:
    found = _fts(node)
    if found is not None:
        table, expression = found
        bindings.append(expression)
        return f"b.id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)"
    if isinstance(node, Tag):
        bindings.extend(tag_bindings(node.name))
        return "b." + tag_clause()
    if isinstance(node, Not):
        return f"NOT ({_sql(node.child, bindings)})"
    assert isinstance(node, And | Or)
    joiner = " AND " if isinstance(node, And) else " OR "
    return "(" + joiner.join(_sql(child, bindings) for child in node.children) + ")"


def _positive_texts(node: Node, table: str, negated: bool = False) -> list[str]:
    if isinstance(node, Text):
        return [] if negated or _table(node) != table else [_leaf(node)]
    if isinstance(node, Not):
        return _positive_texts(node.child, table, not negated)
    if isinstance(node, And | Or):
        return [text for child in node.children for text in _positive_texts(child, table, negated)]
    return []


def exact_tag_clause() -> str:
    """Bookmarks with exactly one tag (no descendants): what a /tags directory lists (bind
    `tagnames.key(name)`)."""
    return (
        "id IN (SELECT bt.bookmark_id FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id "
        "WHERE t.key = ?)"
    )


def tag_clause() -> str:
    """Bookmarks with a tag or any of its descendants (bind `tag_bindings(name)`).

    The tag and its descendants are read as a range of keys (see `tag_bindings`), not as
    `key = 'dev' OR key LIKE 'dev/%'`: no index serves a LIKE with an ESCAPE, and without
    statistics SQLite joined every tag of every bookmark to find one tag's (1.1 s at a million,
    for a tag of 175 bookmarks)."""
    return (
        "id IN (SELECT bt.bookmark_id FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id "
        f"WHERE {tag_keys('t.key')})"
    )


def tag_keys(column: str = "key") -> str:
    """Tags' keys equal to a tag's or under it (bind `tag_bindings(name)`), as a range the key
    index serves (see `tag_clause`)."""
    return f"{column} >= ? AND {column} < ? AND ({column} = ? OR {column} >= ?)"


def like_escape(text: str) -> str:
    """Text matched literally by `LIKE ? ESCAPE '\\'` (no `%` or `_` wildcards from users)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_prefix(name: str) -> str:
    """The LIKE pattern for a tag's descendants."""
    return like_escape(name) + "/%"


def tag_bindings(name: str) -> list[str]:
    """Bindings for `tag_clause()`: tags compare by their case-folded key (`Äpfel` = `äpfel`)."""
    folded = tag_key(name)
    # One range of the key index, `dev` up to `dev0` ("0" follows "/"), less what is in it but
    # neither the tag nor under it (`dev-tools`, `dev.x`).
    return [folded, folded + "0", folded, folded + "/"]


def _encodable(text: str) -> str:
    """Text SQLite can take (a lone surrogate, as from undecodable command-line bytes, cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryError(f"cannot search for {text!r}: it is not valid Unicode") from None
    return text


def full_text(
    store: Any, text: str, limit: int | None, ranked: int = RANKED_HITS
) -> list[SearchHit]:
    """The hits of a query, best first: when it is one FTS5 expression, BM25 ranks its newest
    `ranked` hits and the older ones follow newest first, unranked (score None)."""
    tree = parse(_encodable(text))
    whole = _fts(tree)
    count = -1 if limit is None else limit
    rankings: dict[str, str] = {}
    if whole is not None:  # the common case: one FTS5 query drives everything
        table, expression = whole
        rankings[table] = expression
        # Ranked inside the index alone, then only the page of hits reads its bookmarks. BM25
        # ranks the newest RANKED_HITS hits (FTS5 walks its hits newest first and stops there),
        # the rest follow newest first, unranked: a word in a fifth of a million bookmarks costs
        # the same as one in RANKED_HITS (see RANKED_HITS for why).
        pool = (
            f"SELECT rowid AS id, bm25({table}, {WEIGHTS}) AS score FROM {table} "
            f"WHERE {table} MATCH ?1 ORDER BY rowid DESC LIMIT ?3"
        )
        if limit is not None and limit <= ranked:
            # A page no longer than the pool (every command's and the web UI's): when the pool
            # is full it holds the whole page, and when it is not, it holds every hit, so no
            # unranked hit can be on the page. The pool then streams into a sort that keeps
            # the page's rows only: written to a table first (to find its oldest hit for the
            # unranked rest) it cost a tenth of `kernel`'s search at a million.
            sql = (
                f"SELECT {QUALIFIED}, hit.score FROM (SELECT id, score FROM ({pool}) "
                "ORDER BY score, id DESC LIMIT ?2) AS hit JOIN bookmarks b ON b.id = hit.id "
                "ORDER BY hit.score, b.id DESC"
            )
        else:
            sql = (
                f"WITH pool AS MATERIALIZED ({pool}), "
                "hit AS (SELECT * FROM (SELECT id, score FROM pool ORDER BY score, id DESC "
                "LIMIT ?2) UNION ALL SELECT * FROM (SELECT rowid AS id, NULL AS score "
                f"FROM {table} WHERE {table} MATCH ?1 AND rowid < (SELECT min(id) FROM pool) "
                "ORDER BY rowid DESC) LIMIT ?2) "
                f"SELECT {QUALIFIED}, hit.score FROM hit JOIN bookmarks b ON b.id = hit.id "
                "ORDER BY hit.score IS NULL, hit.score, b.id DESC"
            )
        bindings: list[Any] = [expression, count, ranked]
    else:  # tags, a stand-alone NOT, or both indexes: SQL decides, FTS5 ranks what it can
        where_bindings: list[Any] = []
        where = _sql(tree, where_bindings)
        for table in (STEMMED, WORDS):
            ranking = " OR ".join(_positive_texts(tree, table))
            if ranking:
                rankings[table] = ranking
        ctes = [
            f"r{n} AS MATERIALIZED (SELECT rowid AS id, bm25({table}, {WEIGHTS}) AS score "
            f"FROM {table} WHERE {table} MATCH ?)"
            for n, table in enumerate(rankings)
        ]
        joins = "".join(f" LEFT JOIN r{n} ON r{n}.id = b.id" for n in range(len(rankings)))
        if rankings:
            scored = " + ".join(f"coalesce(r{n}.score, 0)" for n in range(len(rankings)))
            unranked = " AND ".join(f"r{n}.score IS NULL" for n in range(len(rankings)))
            sql = (
                f"WITH {', '.join(ctes)} SELECT {QUALIFIED}, "
                f"CASE WHEN {unranked} THEN NULL ELSE {scored} END AS total "
                f"FROM bookmarks b{joins} WHERE {where} "
                "ORDER BY total IS NULL, total, b.id DESC LIMIT ?"
            )
        else:
            sql = (
                f"SELECT {QUALIFIED}, NULL FROM bookmarks b WHERE {where} "
                "ORDER BY b.added DESC, b.id DESC LIMIT ?"
            )
        bindings = [*rankings.values(), *where_bindings, count]
    try:
        rows = store.execute(sql, bindings).fetchall()
        snippets = _snippets(store, rankings, [row[0] for row in rows])
    except Exception as error:  # FTS5 refuses what our parser let through: still one line
        raise QueryError(f"cannot search for {text!r}: {error}") from None
    return [
        SearchHit(
            row_to_bookmark(row[:WIDTH]),
            None if row[WIDTH] is None else -row[WIDTH],
            snippets.get(row[0]),
        )
        for row in rows
    ]


def _snippets(store: Any, rankings: dict[str, str], ids: list[int]) -> dict[int, str]:
    """Snippets for the rows shown only (computing them for every match is the slow part); the
    stemmed index's first, the prefix index's where the first has none.

    The hits between the lowest and the highest id shown are walked once and the shown ones
    picked (`+rowid` keeps SQLite from seeking each id in the index, 0.15 ms a seek for a common
    word: 11 ms for a page of 50, against 2 ms for the walk); the ids go as one JSON array, as
    many as there are (one variable each would fail past SQLite's 32,766)."""
    found: dict[int, str] = {}
    for table, ranking in rankings.items():
        missing = [bookmark_id for bookmark_id in ids if bookmark_id not in found]
        if not missing:
            break
        found.update(
            store.execute(
                f"SELECT rowid, snippet({table}, -1, '[', ']', '…', 10) FROM {table} "
                f"WHERE {table} MATCH ? AND rowid BETWEEN ? AND ? "
                "AND +rowid IN (SELECT value FROM json_each(?))",
                [ranking, min(missing), max(missing), json.dumps(missing)],
            )
        )
    return found


def substring(store: Any, text: str, limit: int | None) -> list[SearchHit]:
    """Case-insensitive (ASCII) substring match in title, URL, description and tags."""
    if not _encodable(text).strip():
        raise QueryError("empty search")
    return _newest(store, Text(text), limit)


def query_substring(store: Any, text: str, limit: int | None) -> list[SearchHit]:
    """The query language where FTS5 is missing: each word or phrase a substring as in
    `substring` (a prefix too; no stemming), in the field named if any; tags, AND, OR and NOT as
    with FTS5. Unranked: newest first, without snippets."""
    return _newest(store, parse(_encodable(text)), limit)


def _newest(store: Any, tree: Node, limit: int | None) -> list[SearchHit]:
    bindings: list[Any] = []
    where = _like(tree, bindings)
    rows = store.execute(
        f"SELECT {QUALIFIED} FROM bookmarks b WHERE {where} ORDER BY b.added DESC, b.id DESC "
        "LIMIT ?",
        [*bindings, -1 if limit is None else limit],
    ).fetchall()
    return [SearchHit(row_to_bookmark(row)) for row in rows]


def _like(node: Node, bindings: list[Any]) -> str:
    """The tree as LIKE clauses (column names come from FIELDS, never from the user)."""
    if isinstance(node, Text):
        columns = (node.field,) if node.field else SUBSTRING_COLUMNS
        bindings.extend(["%" + like_escape(node.words) + "%"] * len(columns))
        return "(" + " OR ".join(f"b.{column} LIKE ? ESCAPE '\\'" for column in columns) + ")"
    if isinstance(node, Tag):
        bindings.extend(tag_bindings(node.name))
        return "b." + tag_clause()
    if isinstance(node, Not):
        return f"NOT ({_like(node.child, bindings)})"
    joiner = " AND " if isinstance(node, And) else " OR "
    return "(" + joiner.join(_like(child, bindings) for child in node.children) + ")"
