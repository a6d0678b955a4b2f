"""The built-in tag suggester: TF-IDF over the library's own words and tags, no download.

Each tag gets a profile: the summed TF-IDF weights of the words of the bookmarks that carry it
(title, description, URL words and, where the caller passes it, the cached page text). A bookmark's
suggestions are the tags whose profile is closest to its own words (cosine similarity), plus a
bonus for a tag whose own name appears among its words. Profiles are built once per command, the
first time a suggestion is asked for: one pass over the library.
"""

import math
import re
from collections import Counter
from typing import Any

from marks import __version__

_WORD = re.compile(r"[^\W\d_]{3,}", re.UNICODE)
_STOP_WORDS = (  # common English and URL words that say nothing about a topic
    "the and for with that this from your you are was were have has had not but all can will "
    "what when where which who how why into about more most other some such than then there "
    "these those their they them its our out over only also just like get new use using used "
    "www http https com org net html htm php index page home"
)
_STOP = frozenset(_STOP_WORDS.split(" "))
PROFILE_TERMS = 60  # the strongest words kept per tag: enough to tell tags apart, small to compare
LIMIT = 10


def words(text: str) -> list[str]:
    return [w for w in (m.group().casefold() for m in _WORD.finditer(text)) if w not in _STOP]


def _bookmark_text(bookmark: Any) -> str:
    return f"{bookmark.title} {bookmark.description} {bookmark.url}"


class KeywordSuggester:
    name = "keywords"
    type = "tag_suggester"
    version = __version__
    priority = 50
    description = "Suggests the library's own tags by TF-IDF similarity of words (no download)."
    author = "marks"
    dependencies: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.library: Any = None
        self._idf: dict[str, float] | None = None
        self._profiles: dict[str, dict[str, float]] = {}

    def on_load(self, context: Any) -> None:
        self.library = context.library

    def _build(self) -> None:
        documents = 0
        frequency: Counter[str] = Counter()
        tagged: list[tuple[list[str], Counter[str]]] = []
        for bookmark in self.library.iterate():
            counts = Counter(words(_bookmark_text(bookmark)))
            documents += 1
            frequency.update(counts.keys())
            if bookmark.tags:
                tagged.append((bookmark.tags, counts))
        self._idf = {w: math.log((1 + documents) / (1 + n)) + 1 for w, n in frequency.items()}
        sums: dict[str, Counter[str]] = {}
        for tags, counts in tagged:
            vector = self._weigh(counts)
            for tag in tags:
                sums.setdefault(tag, Counter()).update(vector)
        self._profiles = {
            tag: _unit(dict(total.most_common(PROFILE_TERMS))) for tag, total in sums.items()
        }

    def _weigh(self, counts: Counter[str]) -> dict[str, float]:
        assert self._idf is not None
        default = max(self._idf.values(), default=1.0)
        return {w: (1 + math.log(n)) * self._idf.get(w, default) for w, n in counts.items()}

    def suggest(self, bookmark: Any, text: str = "") -> list[tuple[str, float]]:
        if self._idf is None:
            self._build()
        counts = Counter(words(f"{_bookmark_text(bookmark)} {text}"))
        if not counts:
            return []
        vector = _unit(self._weigh(counts))
        present = set(counts)
        # A tag it has, or an ancestor of one (`python` for `python/async`), is no news.
        own = {
            "/".join(parts[:depth]).casefold()
            for parts in (tag.split("/") for tag in bookmark.tags)
            for depth in range(1, len(parts) + 1)
        }
        scores: list[tuple[str, float]] = []
        for tag, profile in self._profiles.items():
            if tag.casefold() in own:
                continue
            score = sum(weight * profile.get(w, 0.0) for w, weight in vector.items())
            leaf = tag.rsplit("/", 1)[-1].casefold()
            if leaf in present:
                score = 0.5 + score / 2  # its own name is on the page: a strong hint
            if score > 0:
                scores.append((tag, round(min(score, 1.0), 3)))
        scores.sort(key=lambda pair: (-pair[1], pair[0]))
        return scores[:LIMIT]


def _unit(vector: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
    return {w: v / norm for w, v in vector.items()}
