"""The search query language: what a person types, parsed into a small syntax tree.

  words              all must match (implicit AND), stemmed and diacritic-insensitive
  word*              prefix of a word as written (`programm*` finds "Programming")
  "a phrase"         the words in order
  AND, OR, NOT       upper case only; NOT binds tightest, then AND, then OR
  -word              NOT word (also -"a phrase", -#tag, -title:word)
  ( ... )            grouping
  title:x url:x description:x   a word, prefix* or "phrase" in one field
  #tag, tag:tag      the tag or any descendant (`#dev` matches `dev/python`); tag:"two words"

This module knows nothing of SQL: `marks.search` turns the tree into statements. The CLI and the
shell both hand the text to it, so the language is the same everywhere.
"""

import re
from typing import TypeAlias

import msgspec

from marks import limits
from marks.exceptions import Invalid

FIELDS = {"title": "title", "url": "url", "description": "description", "desc": "description"}


class QueryError(Invalid):
    pass


# The syntax tree's nodes: read-only values, equal and hashed by their fields. msgspec Structs
# (msgspec is loaded anyway) rather than dataclasses, each of which costs about 4 M
# instructions when its module loads (its methods compiled with `exec`): about 18 M for these
# five on every search command.
class Text(msgspec.Struct, frozen=True):
    words: str
    phrase: bool = False
    prefix: bool = False
    field: str | None = None


class Tag(msgspec.Struct, frozen=True):
    name: str


class Not(msgspec.Struct, frozen=True):
    child: "Node"


class And(msgspec.Struct, frozen=True):
    children: tuple["Node", ...]


class Or(msgspec.Struct, frozen=True):
    children: tuple["Node", ...]


Node: TypeAlias = Text | Tag | Not | And | Or

_TOKEN = re.compile(r'\s*(?:(\()|(\))|("(?:[^"]|"")*"?)|([^\s()"]+(?:"(?:[^"]|"")*"?)?))')
_LEADING = re.compile(r"^(-?)(#|(?:tag|title|url|description|desc):)?", re.IGNORECASE)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
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


def quote_words(words: list[str]) -> str:
    """Words a shell has already split (its quotes removed) as query text: a word with spaces
    in it was quoted by the person, so it stays a phrase (`find "a b"`, `tag:"x y"`)."""
    parts = []
    for word in words:
        if not any(character.isspace() for character in word) or '"' in word:
            parts.append(word)
            continue
        match = _LEADING.match(word)
        head = match.group(0) if match else ""
        parts.append(head + '"' + word[len(head) :] + '"')
    return " ".join(parts)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0
        self.depth = 0
        self.terms = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def parse(self) -> Node:
        if not self.tokens:
            raise QueryError("empty search")
        node = self.parse_or()
        if self.peek() is not None:
            raise QueryError(f"unexpected {self.peek()!r}")
        return node

    def parse_or(self) -> Node:
        children = [self.parse_and()]
        while self.peek() == "OR":
            self.take()
            children.append(self.parse_and())
        return children[0] if len(children) == 1 else Or(tuple(children))

    def parse_and(self) -> Node:
        children = [self.parse_unary()]
        while self.peek() not in (None, "OR", ")"):
            if self.peek() == "AND":
                self.take()
            children.append(self.parse_unary())
        return children[0] if len(children) == 1 else And(tuple(children))

    def parse_unary(self) -> Node:
        self.depth += 1  # every parenthesis, NOT and `-` passes here
        if self.depth > limits.QUERY_NESTING:
            raise QueryError(f"the search nests more than {limits.QUERY_NESTING} levels deep")
        try:
            token = self.peek()
            if token == "NOT":
                self.take()
                return Not(self.parse_unary())
            if token is not None and token.startswith("-") and len(token) > 1:
                self.tokens[self.position] = token[1:]
                return Not(self.parse_unary())
            return self.parse_atom()
        finally:
            self.depth -= 1

    def parse_atom(self) -> Node:
        self.terms += 1
        if self.terms > limits.QUERY_TERMS:
            raise QueryError(f"the search has more than {limits.QUERY_TERMS} terms")
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


def _atom(token: str) -> Node:
    if token.startswith('"'):
        return Text(_unquote(token), phrase=True)
    if token.startswith("#") or token.lower().startswith("tag:"):
        name = token[1:] if token.startswith("#") else token[4:]
        name = _unquote(name) if name.startswith('"') else name
        if not name.strip().strip("/"):
            raise QueryError("a tag filter needs a tag name")
        return Tag(name.strip().strip("/"))
    field, sep, rest = token.partition(":")
    if sep and field.lower() in FIELDS and not rest:
        raise QueryError(f"{field}: needs a word or a phrase after it")
    if sep and field.lower() in FIELDS:
        inner = _atom(rest)
        if not isinstance(inner, Text) or inner.field:
            raise QueryError(f"{field}: takes a word or a phrase")
        return Text(inner.words, inner.phrase, inner.prefix, FIELDS[field.lower()])
    prefix = token.endswith("*")
    words = token.rstrip("*")
    if not words:
        raise QueryError("'*' must follow a word")
    return Text(words, prefix=prefix)


def parse(text: str) -> Node:
    """The syntax tree of a query; QueryError (one line) when it cannot be read."""
    return _Parser(text).parse()
