"""`/tags`: counts (flat or as a tree), names for completion, rename and delete with subtags."""

import msgspec

from marks.library import Library
from marks.server.endpoint import Call, Endpoint, Param
from marks.wire import TagCount


class TagNode(msgspec.Struct):
    name: str  # the last segment
    path: str  # the whole tag
    count: int  # bookmarks with this tag or a descendant
    children: list["TagNode"]


class TagRename(msgspec.Struct, forbid_unknown_fields=True):
    name: str  # the new name; `a/b` moves the tag under `a`


class TagChange(msgspec.Struct):
    bookmarks: int  # how many bookmarks the change touched


def tree(counts: list[TagCount]) -> list[TagNode]:
    """Counts arrive parents first (sorted by name), so each node's parent already exists."""
    roots: list[TagNode] = []
    nodes: dict[str, TagNode] = {}
    for item in counts:
        node = TagNode(item.name.rsplit("/", 1)[-1], item.name, item.count, [])
        nodes[item.name.casefold()] = node
        parent = nodes.get(item.name.rpartition("/")[0].casefold())
        (parent.children if parent is not None else roots).append(node)
    return roots


# The last tree built and the counts it was built from: the counts are the same list until the
# library changes (marks.tagcounts), and nesting 22,903 tags took 40 ms a visit at a million.
_last_tree: tuple[list[TagCount], list[TagNode]] = ([], [])


def tags(library: Library, call: Call) -> list[TagCount] | list[TagNode]:
    global _last_tree
    counts = library.tag_counts()
    if not call.query["tree"]:
        return counts
    built, nodes = _last_tree
    if built is not counts:
        nodes = tree(counts)
        _last_tree = (counts, nodes)
    return nodes


def complete(library: Library, call: Call) -> list[str]:
    return library.tag_names(call.query["prefix"], call.query["limit"])


def rename(library: Library, call: Call) -> TagChange:
    return TagChange(library.tag_rename(call.path["name"], call.body.name))


def delete(library: Library, call: Call) -> TagChange:
    return TagChange(library.tag_delete(call.path["name"]))


ONE = "/tags/{name:path}"
ENDPOINTS = [
    Endpoint("GET", "/tags", "Every tag with counts (descendants included), or the tree", tags,
             (Param("tree", bool, False, "nest tags on `/`"),),
             response=(list[TagCount], list[TagNode])),
    Endpoint("GET", "/tags/complete", "Tag names starting with a prefix (for completion)",
             complete, (Param("prefix", str, "", "the start of the name"),
                        Param("limit", int, 20, "at most this many", 1, 1000)),
             response=list[str]),
    Endpoint("PATCH", ONE, "Rename a tag and its subtags (merging into existing ones)", rename,
             body=TagRename, response=TagChange, errors=(404, 422)),
    Endpoint("DELETE", ONE, "Remove a tag and its subtags from every bookmark", delete,
             response=TagChange, errors=(404, 422)),
]  # fmt: skip
