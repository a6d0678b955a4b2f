"""The built-in tag suggester: keywords of a page scored by TF-IDF over the library's own text.

No download and no model: a bookmark's words (its stored page text, title and description) are
weighed by how often they occur in it and how rare they are across the library. Tags the library
already uses score higher than new words, so suggestions join the existing vocabulary rather than
scatter it. Scores are in 0..1 (1: the bookmark's strongest term).
"""

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from marks.library import Invalid, Library

_WORD = re.compile(r"[^\W\d_][\w'-]{2,}", re.UNICODE)
NEW_WORD_WEIGHT = 0.7  # a new tag must be clearly stronger than a known one to rank above it
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


@dataclass
class Suggestion:
    id: int
    tag: str
    score: float
    known: bool  # the library already has this tag


def _words(text: str) -> list[str]:
    return [w for w in (m.group(0).casefold() for m in _WORD.finditer(text)) if w not in STOPWORDS]


def _documents(library: Library) -> Iterable[tuple[int, str]]:
    yield from library.store.execute(
        "SELECT b.id, b.title || ' ' || b.description || ' ' || coalesce(c.text, '') "
        "FROM bookmarks b LEFT JOIN page_content c ON c.bookmark_id = b.id"
    )


def suggest(
    library: Library,
    *,
    ids: Sequence[int] = (),
    everything: bool = False,
    min_score: float = 0.3,
    limit: int = 3,
) -> list[Suggestion]:
    if not (ids or everything):
        raise Invalid("say which bookmarks: IDS or --all")
    for bookmark_id in ids:
        library.get(bookmark_id)
    wanted = set(ids)
    frequency: Counter[str] = Counter()
    documents = 0
    mine: dict[int, Counter[str]] = {}
    for bookmark_id, text in _documents(library):
        words = _words(text)
        documents += 1
        frequency.update(set(words))
        if everything or bookmark_id in wanted:
            mine[bookmark_id] = Counter(words)
    known = {name.rsplit("/", 1)[-1].casefold(): name for name in library.tag_names(limit=100000)}
    results: list[Suggestion] = []
    for bookmark_id, counts in sorted(mine.items()):
        if not counts:
            continue
        have = {tag.casefold() for tag in library.get(bookmark_id).tags}
        have |= {tag.rsplit("/", 1)[-1].casefold() for tag in have}
        scored: dict[str, tuple[float, bool]] = {}
        for word, count in counts.items():
            idf = math.log((1 + documents) / (1 + frequency[word])) + 1
            weight = (1 + math.log(count)) * idf
            is_known = word in known
            scored[known.get(word, word)] = (
                weight * (1 if is_known else NEW_WORD_WEIGHT),
                is_known,
            )
        top = max(score for score, _ in scored.values())
        ranked = sorted(scored.items(), key=lambda item: (-item[1][0], item[0]))
        picked = 0
        for tag, (score, is_known) in ranked:
            if picked >= limit or score / top < min_score:
                break
            if tag.casefold() in have:
                continue
            results.append(Suggestion(bookmark_id, tag, score / top, is_known))
            picked += 1
    return results


def apply(library: Library, suggestions: Iterable[Suggestion]) -> int:
    added = 0
    for item in suggestions:
        added += library.tag_add(item.tag, [item.id])
    return added
