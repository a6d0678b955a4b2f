"""How many bookmarks each tag holds, its descendants included: the sidebar's tag tree, `tag
list`, `tag stats`. Counted from the tag index in a few passes, and kept until the library
changes (`marks.kept`).

A parent counts each bookmark once however many of its subtags the bookmark has, so the count is
not the sum of its children's. Summing the direct counts up the tree is exact except for a
bookmark with two or more tags under one node; only bookmarks whose tags share a first segment
can be such a bookmark, and only those are read tag by tag and taken off again. At a million
bookmarks (1.5 million tag links, 22,903 tags) this is 2,676 bookmarks: the whole count read
every link into a set per tag before (2 s of CPU in-process, about 0.5 s now, then nothing until
the file changes).
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
    import json  # here: every command loads this module (5 M instructions), few count tags

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
    # Two tags share a node only when they share a root (their first segment), so only roots
    # holding two or more tags can give a bookmark twice to a node. SQLite finds the bookmarks
    # with two links into one such root by reading those tags' ranges of the tag index (a third
    # of the links at a million) and grouping them by root and bookmark; only those bookmarks'
    # tags are then read. (Grouping every link by bookmark instead, and checking the roots in
    # Python, took about three times the CPU.)
    by_root: dict[str, list[int]] = {}
    for tag_id, name in names.items():
        by_root.setdefault(name.partition("/")[0], []).append(tag_id)
    root_of = {
        str(tag_id): number
        for number, tag_ids in enumerate(t for t in by_root.values() if len(t) > 1)
        for tag_id in tag_ids
    }
    twice = [
        bookmark_id
        for (bookmark_id,) in store.execute(
            "SELECT DISTINCT bookmark_id FROM ("
            " SELECT j.value AS tree, bt.bookmark_id FROM json_each(?) AS j"
            " JOIN bookmark_tags AS bt ON bt.tag_id = CAST(j.key AS INTEGER)"
            " GROUP BY tree, bt.bookmark_id HAVING count(*) > 1)",
            (json.dumps(root_of),),
        )
    ]
    tags_of: dict[int, list[int]] = {}
    for bookmark_id, tag_id in store.execute(
        "SELECT bookmark_id, tag_id FROM bookmark_tags"
        " WHERE bookmark_id IN (SELECT value FROM json_each(?))",
        (json.dumps(twice),),
    ):
        tags_of.setdefault(bookmark_id, []).append(tag_id)
    for tag_ids in tags_of.values():
        shared = Counter(node for tag_id in tag_ids for node in _nodes(names[tag_id]))
        for node, times in shared.items():
            total[node] -= times - 1  # counted once per tag under it, but one bookmark
    return [
        TagCount(name, total[name], direct.get(name, 0)) for name in sorted(total, key=str.casefold)
    ]
