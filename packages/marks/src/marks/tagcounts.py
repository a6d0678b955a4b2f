"""How many bookmarks each tag holds, its descendants included: the sidebar's tag tree, `tag
list`, `tag stats`. Counted from the tag index in a few passes, and kept until the library
changes (`marks.kept`).

A parent counts each bookmark once however many of its subtags the bookmark has, so the count is
not the sum of its children's. Summing the direct counts up the tree is exact except for a
bookmark with two or more tags under one node; only bookmarks whose tags share a first segment
can be such a bookmark, and only those are read tag by tag and taken off again. At a million
bookmarks (1.5 million tag links, 22,903 tags) this is 2,676 bookmarks: the whole count read
every link into a set per tag before (2 s of CPU in-process, 1 s now, then nothing until the
file changes).
"""

from collections import Counter

from marks import kept, tagnames
from marks.store import Store
from marks.wire import TagCount


def tag_counts(store: Store) -> list[TagCount]:
    """Every tag and every implied parent, sorted by name folded, with counts that include
    descendants; the same list until the library changes (`marks.kept`: do not modify it)."""
    return kept.kept(store, "tag counts", _count)


def _nodes(name: str) -> list[str]:
    return [*tagnames.ancestors(name), name]


def _count(store: Store) -> list[TagCount]:
    names: dict[int, str] = dict(store.execute("SELECT id, name FROM tags"))
    # The tag index (tag_id, bookmark_id) counts each tag's bookmarks without the table.
    direct: dict[str, int] = {
        names[tag_id]: count
        for tag_id, count in store.execute(
            "SELECT tag_id, count(*) FROM bookmark_tags GROUP BY tag_id"
        )
    }
    total: Counter[str] = Counter()
    for name, count in direct.items():
        for node in _nodes(name):
            total[node] += count
    # Ids as text, as group_concat gives them: their first segment, the root of the tree they
    # are in. Two tags share a node only when they share a root.
    roots: dict[str, int] = {}
    root_of = {
        str(tag_id): roots.setdefault(name.partition("/")[0], len(roots))
        for tag_id, name in names.items()
    }
    for (ids,) in store.execute(
        "SELECT group_concat(tag_id) FROM bookmark_tags GROUP BY bookmark_id HAVING count(*) > 1"
    ):
        tag_ids = ids.split(",")
        if len({root_of[tag_id] for tag_id in tag_ids}) == len(tag_ids):
            continue
        shared = Counter(node for tag_id in tag_ids for node in _nodes(names[int(tag_id)]))
        for node, times in shared.items():
            total[node] -= times - 1  # counted once per tag under it, but one bookmark
    return [
        TagCount(name, total[name], direct.get(name, 0)) for name in sorted(total, key=str.casefold)
    ]
