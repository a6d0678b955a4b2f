"""The built-in tag suggester: keywords of a page scored by TF-IDF over the library's own text.

No download and no model: a bookmark's words (its title, description and stored page text) are
weighed by how often they occur in it and how rare they are across the library. Tags the library
already uses score higher than new words, so suggestions join the existing vocabulary rather than
scatter it. Scores are in 0..1 (1: the bookmark's strongest term). It is registered as the plugin
`keywords` (type tag_suggester) like any other plugin; the library-wide word counts are made once
per command, the first time a suggestion is asked for.
"""

import math
import re
from collections import Counter
from typing import Any

from marks import __version__

_WORD = re.compile(r"[^\W\d_][\w'-]{2,}", re.UNICODE)
NEW_WORD_WEIGHT = 0.7  # a new tag must be clearly stronger than a known one to rank above it
LIMIT = 10
STOPWORDS = frozenset(
    (
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "any",
        "can",
        "had",
        "her",
        "was",
        "one",
        "our",
        "out",
        "day",
        "get",
        "has",
        "him",
        "his",
        "how",
        "man",
        "new",
        "now",
        "old",
        "see",
        "two",
        "way",
        "who",
        "boy",
        "did",
        "its",
        "let",
        "put",
        "say",
        "she",
        "too",
        "use",
        "that",
        "with",
        "have",
        "this",
        "will",
        "your",
        "from",
        "they",
        "know",
        "want",
        "been",
        "good",
        "much",
        "some",
        "time",
        "very",
        "when",
        "come",
        "here",
        "just",
        "like",
        "long",
        "make",
        "many",
        "more",
        "only",
        "over",
        "such",
        "take",
        "than",
        "them",
        "well",
        "were",
        "what",
        "which",
        "while",
        "about",
        "after",
        "again",
        "also",
        "because",
        "before",
        "being",
        "between",
        "both",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "even",
        "every",
        "into",
        "itself",
        "most",
        "must",
        "other",
        "same",
        "should",
        "since",
        "still",
        "their",
        "theirs",
        "there",
        "these",
        "those",
        "through",
        "under",
        "until",
        "upon",
        "where",
        "whether",
        "would",
        "yours",
        "http",
        "https",
        "www",
        "com",
        "org",
        "net",
        "html",
        "page",
        "home",
        "menu",
        "login",
        "search",
        "copyright",
        "cookie",
        "cookies",
        "privacy",
        "policy",
        "terms",
        "read",
        "more",
        "click",
    )
)


def words(text: str) -> list[str]:
    return [w for w in (m.group(0).casefold() for m in _WORD.finditer(text)) if w not in STOPWORDS]


def _own(tags: list[str]) -> set[str]:
    """A bookmark's tags, their leaves and their ancestors: suggesting any of them is no news."""
    have: set[str] = set()
    for tag in tags:
        parts = tag.casefold().split("/")
        have.add(parts[-1])
        have.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return have


class KeywordSuggester:
    name = "keywords"
    type = "tag_suggester"
    version = __version__
    priority = 50
    description = "Suggests tags from a page's words by TF-IDF over the library (no download)."
    author = "marks"
    dependencies: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.library: Any = None
        self._documents = 0
        self._frequency: Counter[str] | None = None
        self._known: dict[str, str] = {}

    def on_load(self, context: Any) -> None:
        self.library = context.library

    def _count(self) -> None:
        frequency: Counter[str] = Counter()
        documents = 0
        for text in self.library.corpus():
            documents += 1
            frequency.update(set(words(text)))
        self._documents, self._frequency = documents, frequency
        self._known = {
            name.rsplit("/", 1)[-1].casefold(): name
            for name in self.library.tag_names(limit=1_000_000)
        }

    def suggest(self, bookmark: Any, text: str = "") -> list[tuple[str, float]]:
        if self._frequency is None:
            self._count()
        assert self._frequency is not None
        counts = Counter(words(f"{bookmark.title} {bookmark.description} {text}"))
        if not counts:
            return []
        scored: dict[str, float] = {}
        for word, count in counts.items():
            idf = math.log((1 + self._documents) / (1 + self._frequency.get(word, 0))) + 1
            known = self._known.get(word)
            tag = known or word
            scored[tag] = max(
                scored.get(tag, 0.0),
                (1 + math.log(count)) * idf * (1 if known else NEW_WORD_WEIGHT),
            )
        top = max(scored.values())
        have = _own(bookmark.tags)
        ranked = sorted(scored.items(), key=lambda item: (-item[1], item[0]))
        return [
            (tag, round(score / top, 3)) for tag, score in ranked if tag.casefold() not in have
        ][:LIMIT]
