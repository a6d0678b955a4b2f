"""The bookmark graph: bookmarks are nodes; an edge says two bookmarks belong together.

An edge's weight adds up three reasons: how alike their tags are (Jaccard over the tag sets, each
hierarchical tag counting its ancestors: `dev/python` is also `dev`), sharing a registrable domain
(from the Public Suffix List: `a.example.co.uk` and `b.example.co.uk`), and a link from one to the
other in cached page content. `build` computes the edges with bounded work per bookmark (SQLite
reads and sorts, numpy arrays score and rank) and stores them; `query` reads them (neighbours,
stats); `export` writes GEXF, GraphML and JSON.
"""

from collections.abc import Iterable

import msgspec

from marks.exceptions import Conflict

TAG_WEIGHT = 1.0  # times the Jaccard index (0..1)
SITE_WEIGHT = 0.5  # same registrable domain
LINK_WEIGHT = 1.0  # one page links to the other
NEIGHBOURS = 20  # edges kept per bookmark: its strongest (an edge stays if either end keeps it)
# Provenance, not topic: every bookmark from one browser has them, so they relate nothing.
IGNORED_TAG_ROOTS = ("imported", "history")


class BuildReport(msgspec.Struct):
    nodes: int
    edges: int
    seconds: float


class Neighbour(msgspec.Struct, kw_only=True):
    id: int
    url: str
    title: str
    weight: float
    shared_tags: list[str] = []  # the most specific tags both have
    site: str | None = None  # the registrable domain both are on
    link: str | None = None  # "to" (this bookmark links to it), "from", "both"
    why: str = ""


class Connected(msgspec.Struct):
    id: int
    title: str
    degree: int


class GraphStats(msgspec.Struct, kw_only=True):
    nodes: int
    edges: int
    components: int  # isolated bookmarks count as one component each
    isolated: int
    largest_component: int
    density: float
    most_connected: list[Connected] = []
    built_at: str | None = None


def counted_tags(names: Iterable[str]) -> set[str]:
    """A bookmark's tags as the graph counts them: each with its ancestors, provenance left out."""
    expanded: set[str] = set()
    for name in names:
        if not name or name.split("/", 1)[0].casefold() in IGNORED_TAG_ROOTS:
            continue
        parts = name.casefold().split("/")
        expanded.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return expanded


class NotBuilt(Conflict):
    """Neighbours, stats and exports read the stored graph: `graph build` makes it."""


class GraphNode(msgspec.Struct, kw_only=True):
    """A node of the JSON export: one bookmark."""

    id: int
    label: str  # the title, else the URL
    url: str
    domain: str
    tags: str  # comma-separated


class GraphEdge(msgspec.Struct, kw_only=True):
    """An edge of the JSON export, stored once (source < target)."""

    source: int
    target: int
    weight: float
    tags: float  # the Jaccard part
    site: str  # the registrable domain both are on, or ""
    link: int  # 1: source links to target, 2: the reverse, 3: both, 0: none


class NodeLinkGraph(msgspec.Struct, kw_only=True):
    """The JSON export: networkx's node-link format (`node_link_graph(data, edges="edges")`)."""

    directed: bool
    multigraph: bool
    graph: dict[str, str]
    nodes: list[GraphNode]
    edges: list[GraphEdge]
