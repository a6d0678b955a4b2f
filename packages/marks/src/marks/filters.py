"""The filter language of `bookmark query`: a safe, small alternative to raw SQL.

  visits > 3 and tag:python and added >= 2024-05
  (starred or domain:github.com) and not archived
  title ~ "release notes" or url ~ changelog

Fields: id, url, title, description, domain, visits (visit_count), added, visited
(last_visited). Operators: = != < <= > >= and ~ (contains, case-insensitive). Dates take YYYY,
YYYY-MM, YYYY-MM-DD or ISO 8601 and compare by period: `added = 2024-05` is all of May 2024.
Flags: starred, archived, unread, visited, broken, reachable, unchecked, untagged.
`tag:NAME` includes descendants. `and` is implied between terms; keywords are case-insensitive.
Every value is a bound parameter and every column comes from the table below: no input is SQL.
"""

import datetime as dt
import re
from typing import Any

from marks import clock, limits, search
from marks.exceptions import Invalid

TEXT = {"url": "url", "title": "title", "description": "description", "domain": "domain"}
NUMBER = {"id": "id", "visits": "visit_count", "visit_count": "visit_count"}
DATE = {"added": "added", "visited": "last_visited", "last_visited": "last_visited"}
FLAGS = {
    "starred": "starred = 1",
    "archived": "archived = 1",
    "unread": "visit_count = 0",
    "visited": "visit_count > 0",
    "broken": "reachable = 0",
    "reachable": "reachable = 1",
    "unchecked": "reachable IS NULL",
    "untagged": "tags = ''",
}
_TOKEN = re.compile(r'\s*(?:(\(|\))|(<=|>=|!=|=|<|>|~)|("(?:[^"\\]|\\.)*")|([^\s()<>=!~"]+))')


class FilterError(Invalid):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position, text = [], 0, text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise FilterError(f"cannot read the filter at {text[position : position + 20]!r}")
        paren, operator, quoted, word = match.groups()
        if paren:
            tokens.append(("paren", paren))
        elif operator:
            tokens.append(("op", operator))
        elif quoted:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted[1:-1])))
        else:
            tokens.append(("word", word))
        position = match.end()
    return tokens


def _period_end(text: str, start: dt.datetime) -> dt.datetime:
    text = text.strip()
    if len(text) == 4:
        return start.replace(year=start.year + 1)
    if len(text) == 7:
        return (start.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    if len(text) == 10:
        return start + dt.timedelta(days=1)
    return start + dt.timedelta(seconds=1)


class _Compiler:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0
        self.depth = 0
        self.terms = 0
        self.bindings: list[Any] = []

    def peek(self, kind: str | None = None, *words: str) -> bool:
        if self.position >= len(self.tokens):
            return False
        token_kind, value = self.tokens[self.position]
        if kind and token_kind != kind:
            return False
        return not words or value.lower() in words

    def take(self) -> tuple[str, str]:
        if self.position >= len(self.tokens):
            raise FilterError("the filter ends too early")
        token = self.tokens[self.position]
        self.position += 1
        return token

    def compile(self) -> str:
        if not self.tokens:
            raise FilterError("empty filter")
        sql = self.parse_or()
        if self.position < len(self.tokens):
            raise FilterError(f"unexpected {self.tokens[self.position][1]!r}")
        return sql

    def parse_or(self) -> str:
        parts = [self.parse_and()]
        while self.peek("word", "or"):
            self.take()
            parts.append(self.parse_and())
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def parse_and(self) -> str:
        parts = [self.parse_not()]
        while (
            self.position < len(self.tokens)
            and not self.peek("word", "or")
            and not self.peek("paren", ")")
        ):
            if self.peek("word", "and"):
                self.take()
            parts.append(self.parse_not())
        return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"

    def parse_not(self) -> str:
        self.depth += 1  # every parenthesis and every NOT passes here
        if self.depth > limits.QUERY_NESTING:
            raise FilterError(f"the filter nests more than {limits.QUERY_NESTING} levels deep")
        try:
            if self.peek("word", "not"):
                self.take()
                return f"NOT ({self.parse_not()})"
            return self.parse_atom()
        finally:
            self.depth -= 1

    def parse_atom(self) -> str:
        self.terms += 1
        if self.terms > limits.QUERY_TERMS:
            raise FilterError(f"the filter has more than {limits.QUERY_TERMS} terms")
        kind, value = self.take()
        if (kind, value) == ("paren", "("):
            inner = self.parse_or()
            if not self.peek("paren", ")"):
                raise FilterError("missing ')'")
            self.take()
            return inner
        if kind != "word":
            raise FilterError(f"unexpected {value!r}")
        lower = value.lower()
        for prefix, column in (("tag:", None), ("domain:", "domain")):
            if lower.startswith(prefix):
                name = value[len(prefix) :] or (self.take()[1] if self.peek("value") else "")
                if not name:
                    raise FilterError(f"{prefix} needs a name")
                if column is None:
                    self.bindings += search.tag_bindings(name)
                    return search.tag_clause()
                self.bindings += [
                    name.lower().removeprefix("www."),
                    "%." + search.like_escape(name.lower()),
                ]
                return "(domain = ? OR domain LIKE ? ESCAPE '\\')"
        if lower in FLAGS and not self.peek("op"):
            return FLAGS[lower]
        return self.comparison(lower)

    def comparison(self, field: str) -> str:
        if not self.peek("op"):
            raise FilterError(
                f"unknown word {field!r} (a field needs an operator, e.g. {field} = value)"
            )
        operator = self.take()[1]
        value = self.take()[1]
        if field in TEXT:
            column = TEXT[field]
            if operator == "~":
                self.bindings.append(f"%{search.like_escape(value)}%")  # `%` and `_` literal
                return f"{column} LIKE ? ESCAPE '\\'"
            if operator in ("=", "!="):
                self.bindings.append(value)
                return f"{column} {'=' if operator == '=' else '!='} ? COLLATE NOCASE"
            raise FilterError(f"{field} takes = != or ~")
        if field in NUMBER:
            if operator == "~" or not value.isdigit():
                raise FilterError(f"{field} compares with a whole number: {value!r}")
            self.bindings.append(int(value))
            return f"{NUMBER[field]} {operator} ?"
        if field in DATE:
            return self.date(DATE[field], operator, value)
        raise FilterError(f"unknown field {field!r} (fields: {', '.join([*TEXT, *NUMBER, *DATE])})")

    def date(self, column: str, operator: str, value: str) -> str:
        try:
            start = clock.parse_user_date(value)
        except ValueError as error:
            raise FilterError(str(error)) from None
        end = _period_end(value, start)
        bounds = {"<": ("<", start), ">=": (">=", start), "<=": ("<", end), ">": (">=", end)}
        if operator in bounds:
            sign, moment = bounds[operator]
            self.bindings.append(clock.to_text(moment))
            return f"{column} {sign} ?"
        if operator in ("=", "!="):
            self.bindings += [clock.to_text(start), clock.to_text(end)]
            inside = f"({column} >= ? AND {column} < ?)"
            return inside if operator == "=" else f"NOT {inside}"
        raise FilterError(f"dates compare with = != < <= > >=, not {operator}")


def compile_filter(text: str) -> tuple[str, list[Any]]:
    """SQL for a WHERE clause over `bookmarks`, and its bindings."""
    compiler = _Compiler(text)
    return compiler.compile(), compiler.bindings
