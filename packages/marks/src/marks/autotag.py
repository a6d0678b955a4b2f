"""Tag suggestions: each enabled `tag_suggester` asked about each bookmark; applying them.

Scores are 0..1. When several suggesters name the same tag, the highest score counts and every
suggester that named it is listed, so a person can see why a tag was offered.
"""

from collections.abc import Callable, Iterable

import msgspec

from marks.library import Library
from marks.plugins import Plugins


class Suggestion(msgspec.Struct, kw_only=True):
    id: int
    url: str
    tag: str
    score: float
    by: list[str]


def suggest(
    library: Library,
    plugins: Plugins,
    ids: Iterable[int],
    *,
    min_score: float = 0.3,
    limit: int = 3,
    text_of: Callable[[int], str] = lambda bookmark_id: "",
) -> list[Suggestion]:
    """At most `limit` suggestions per bookmark, best first; `text_of` gives stored page text."""
    found: list[Suggestion] = []
    for bookmark_id in ids:
        bookmark = library.get(bookmark_id)
        text = text_of(bookmark_id)
        best: dict[str, Suggestion] = {}
        for name, offered in plugins.apply("tag_suggester", bookmark, text):
            for tag, score in _pairs(offered):
                if score < min_score or any(tag.casefold() == t.casefold() for t in bookmark.tags):
                    continue
                known = best.get(tag.casefold())
                if known is None:
                    best[tag.casefold()] = Suggestion(
                        id=bookmark.id, url=bookmark.url, tag=tag, score=score, by=[name]
                    )
                else:
                    known.score = max(known.score, score)
                    known.by.append(name)
        found += sorted(best.values(), key=lambda s: (-s.score, s.tag))[:limit]
    return found


def _pairs(offered: object) -> list[tuple[str, float]]:
    """A plugin's answer, kept only where it has the documented shape."""
    pairs: list[tuple[str, float]] = []
    if not isinstance(offered, Iterable):
        return pairs
    for item in offered:
        if (
            isinstance(item, tuple | list)
            and len(item) == 2
            and isinstance(item[0], str)
            and item[0].strip()
            and isinstance(item[1], int | float)
        ):
            pairs.append((item[0].strip(), float(item[1])))
    return pairs


def apply(library: Library, suggestions: Iterable[Suggestion]) -> int:
    """Add each suggested tag to its bookmark, all in one transaction; returns how many added."""
    by_tag: dict[str, list[int]] = {}
    for suggestion in suggestions:
        by_tag.setdefault(suggestion.tag, []).append(suggestion.id)
    added = 0
    with library.store.transaction():
        for tag, ids in by_tag.items():
            added += library.tag_add(tag, ids)
    return added
