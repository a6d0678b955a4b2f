"""Search: a small query language compiled to FTS5 and SQL, and plain substring search.

Query language (what a person types):
  words              all must match (implicit AND), stemmed and diacritic-insensitive
  word*              prefix
  "a phrase"         the words in order
  AND, OR, NOT       upper case only; NOT binds tightest, then AND, then OR; `-word` = NOT word
  ( ... )            grouping
  title:x url:x description:x   a word or "phrase" in one field
  #tag, tag:tag      the tag or any descendant (`#dev` matches `dev/python`); tag:"two words"

Words, phrases and field filters become FTS5 expressions (always quoted, so no user text is FTS5
syntax); tags and stand-alone negations become SQL. Results are ranked by BM25 with the title
weighted highest, and carry a snippet.
"""

import re
from dataclasses import dataclass
from typing import Any

from marks.rows import qualified
from marks.rows import to_bookmark as row_to_bookmark
from marks.wire import SearchHit

FIELDS = {"title": "title", "url": "url", "description": "description", "desc": "description"}
WEIGHTS = "10.0, 3.0, 2.0, 5.0, 1.0"  # title, description, url, tags, page_text
QUALIFIED = qualified("b")


class QueryError(ValueError):
    pass


# --- syntax tree ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    words: str
    phrase: bool = False
    prefix: bool = False
    field: str | None = None

    def fts(self) -> str:
        quoted = '"' + self.words.replace('"', '""') + '"'
        if self.prefix:
            quoted += " *"
        return f"{self.field} : {quoted}" if self.field else quoted


@dataclass(frozen=True)
class Tag:
    name: str


@dataclass(frozen=True)
class Not:
    child: Any


@dataclass(frozen=True)
class And:
    children: tuple


@dataclass(frozen=True)
class Or:
    children: tuple


# --- tokens and parser ---------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(\()|(\))|("(?:[^"]|"")*"?)|([^\s()"]+(?:"(?:[^"]|"")*"?)?))')


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            break
        tokens.append(next(group for group in match.groups() if group is not None))
        position = match.end()
    return tokens


def _unquote(token: str) -> str:
    if not token.endswith('"') or len(token) < 2:
        raise QueryError(f"unterminated quote in {token}")
    return token[1:-1].replace('""', '"')


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def parse(self):
        if not self.tokens:
            raise QueryError("empty search")
        node = self.parse_or()
        if self.peek() is not None:
            raise QueryError(f"unexpected {self.peek()!r}")
        return node

    def parse_or(self):
        children = [self.parse_and()]
        while self.peek() == "OR":
            self.take()
            children.append(self.parse_and())
        return children[0] if len(children) == 1 else Or(tuple(children))

    def parse_and(self):
        children = [self.parse_unary()]
        while self.peek() not in (None, "OR", ")"):
            if self.peek() == "AND":
                self.take()
            children.append(self.parse_unary())
        return children[0] if len(children) == 1 else And(tuple(children))

    def parse_unary(self):
        token = self.peek()
        if token == "NOT":
            self.take()
            return Not(self.parse_unary())
        if token is not None and token.startswith("-") and len(token) > 1:
            self.tokens[self.position] = token[1:]
            return Not(self.parse_unary())
        return self.parse_atom()

    def parse_atom(self):
        token = self.peek()
        if token is None:
            raise QueryError("the search ends where a word was expected")
        if token in ("AND", "OR", ")"):
            raise QueryError(f"unexpected {token!r}")
        self.take()
        if token == "(":
            node = self.parse_or()
            if self.peek() != ")":
                raise QueryError("missing ')'")
            self.take()
            return node
        return _atom(token)


def _atom(token: str):
    if token.startswith('"'):
        return Text(_unquote(token), phrase=True)
    if token.startswith("#") or token.lower().startswith("tag:"):
        name = token[1:] if token.startswith("#") else token[4:]
        name = _unquote(name) if name.startswith('"') else name
        if not name.strip():
            raise QueryError("a tag filter needs a tag name")
        return Tag(name.strip().strip("/"))
    field, sep, rest = token.partition(":")
    if sep and field.lower() in FIELDS and not rest:
        raise QueryError(f"{field}: needs a word or a phrase after it")
    if sep and field.lower() in FIELDS:
        inner = _atom(rest)
        if not isinstance(inner, Text):
            raise QueryError(f"{field}: takes a word or a phrase")
        return Text(inner.words, inner.phrase, inner.prefix, FIELDS[field.lower()])
    prefix = token.endswith("*")
    words = token.rstrip("*")
    if not words:
        raise QueryError("'*' must follow a word")
    return Text(words, prefix=prefix)


def parse(text: str):
    return _Parser(text).parse()


# --- compilation ---------------------------------------------------------------------------------


def _fts(node) -> str | None:
    """The node as one FTS5 expression, or None when it needs SQL (tags, bare negation)."""
    if isinstance(node, Text):
        return node.fts()
    if isinstance(node, Or):
        parts = [_fts(child) for child in node.children]
        return None if None in parts else "(" + " OR ".join(parts) + ")"  # type: ignore[arg-type]
    if isinstance(node, And):
        positive = [_fts(c) for c in node.children if not isinstance(c, Not)]
        negative = [_fts(c.child) for c in node.children if isinstance(c, Not)]
        if not positive or None in positive or None in negative:
            return None
        expression = "(" + " AND ".join(positive) + ")"  # type: ignore[arg-type]
        for part in negative:
            expression = f"({expression} NOT {part})"
        return expression
    return None


def _sql(node, bindings: list[Any]) -> str:
    expression = _fts(node)
    if expression is not None:
        bindings.append(expression)
        return "b.id IN (SELECT rowid FROM bookmarks_fts WHERE bookmarks_fts MATCH ?)"
    if isinstance(node, Tag):
        bindings.extend(tag_bindings(node.name))
        return "b." + tag_clause()
    if isinstance(node, Not):
        return f"NOT ({_sql(node.child, bindings)})"
    joiner = " AND " if isinstance(node, And) else " OR "
    return "(" + joiner.join(_sql(child, bindings) for child in node.children) + ")"


def _positive_texts(node, negated: bool = False) -> list[str]:
    if isinstance(node, Text):
        return [] if negated else [node.fts()]
    if isinstance(node, Not):
        return _positive_texts(node.child, not negated)
    if isinstance(node, And | Or):
        return [text for child in node.children for text in _positive_texts(child, negated)]
    return []


def exact_tag_clause() -> str:
    """Bookmarks with exactly one tag (no descendants): what a /tags directory lists."""
    return (
        "id IN (SELECT bt.bookmark_id FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id "
        "WHERE t.name = ?)"
    )


def tag_clause() -> str:
    """Bookmarks with a tag or any of its descendants (bind `tag_bindings(name)`)."""
    return (
        "id IN (SELECT bt.bookmark_id FROM bookmark_tags bt JOIN tags t ON t.id = bt.tag_id "
        "WHERE t.name = ? OR t.name LIKE ? ESCAPE '\\')"
    )


def like_escape(text: str) -> str:
    """Text matched literally by `LIKE ? ESCAPE '\\'` (no `%` or `_` wildcards from users)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_prefix(name: str) -> str:
    """The LIKE pattern for a tag's descendants."""
    return like_escape(name) + "/%"


def tag_bindings(name: str) -> list[str]:
    name = name.strip().strip("/")
    return [name, like_prefix(name)]


def full_text(store, text: str, limit: int | None) -> list[SearchHit]:
    tree = parse(text)
    expression = _fts(tree)
    count = -1 if limit is None else limit
    if expression is not None:  # the common case: one FTS5 query drives everything
        ranking = expression
        sql = (
            f"SELECT {QUALIFIED}, bm25(bookmarks_fts, {WEIGHTS}) AS score "
            "FROM bookmarks_fts JOIN bookmarks b ON b.id = bookmarks_fts.rowid "
            "WHERE bookmarks_fts MATCH ? ORDER BY score, b.id DESC LIMIT ?"
        )
        bindings: list[Any] = [expression, count]
    else:  # tags or a stand-alone NOT: SQL decides, FTS5 ranks what it can
        bindings = []
        where = _sql(tree, bindings)
        ranking = " OR ".join(_positive_texts(tree))
        if ranking:
            sql = (
                "WITH ranked AS MATERIALIZED (SELECT rowid AS id, "
                f"bm25(bookmarks_fts, {WEIGHTS}) AS score FROM bookmarks_fts "
                "WHERE bookmarks_fts MATCH ?) "
                f"SELECT {QUALIFIED}, r.score FROM bookmarks b LEFT JOIN ranked r "
                f"ON r.id = b.id WHERE {where} "
                "ORDER BY r.score IS NULL, r.score, b.id DESC LIMIT ?"
            )
            bindings = [ranking, *bindings, count]
        else:
            sql = (
                f"SELECT {QUALIFIED}, NULL FROM bookmarks b WHERE {where} "
                "ORDER BY b.added DESC, b.id DESC LIMIT ?"
            )
            bindings.append(count)
    try:
        rows = store.execute(sql, bindings).fetchall()
        snippets = _snippets(store, ranking, [row[0] for row in rows]) if ranking else {}
    except Exception as error:  # FTS5 refuses what our parser let through: still one line
        raise QueryError(f"cannot search for {text!r}: {error}") from None
    return [
        SearchHit(
            row_to_bookmark(row[:13]), None if row[13] is None else -row[13], snippets.get(row[0])
        )
        for row in rows
    ]


def _snippets(store, ranking: str, ids: list[int]) -> dict[int, str]:
    """Snippets for the rows shown only (computing them for every match is the slow part)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return dict(
        store.execute(
            "SELECT rowid, snippet(bookmarks_fts, -1, '[', ']', '…', 10) FROM bookmarks_fts "
            f"WHERE bookmarks_fts MATCH ? AND rowid IN ({marks})",
            [ranking, *ids],
        )
    )


def substring(store, text: str, limit: int | None) -> list[SearchHit]:
    """Case-insensitive (ASCII) substring match in title, URL, description and tags."""
    if not text.strip():
        raise QueryError("empty search")
    pattern = "%" + like_escape(text) + "%"
    clause = " OR ".join(
        f"b.{column} LIKE ? ESCAPE '\\'" for column in ("title", "url", "description", "tags")
    )
    rows = store.execute(
        f"SELECT {QUALIFIED} FROM bookmarks b WHERE {clause} "
        "ORDER BY b.added DESC, b.id DESC LIMIT ?",
        [pattern] * 4 + [-1 if limit is None else limit],
    ).fetchall()
    return [SearchHit(row_to_bookmark(row)) for row in rows]
