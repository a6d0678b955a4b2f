"""The bookmark graph: bookmarks are nodes; an edge says two bookmarks belong together.

An edge's weight adds up three reasons: how alike their tags are (Jaccard over the tag sets, each
hierarchical tag counting its ancestors: `dev/python` is also `dev`), sharing a registrable domain
(from the Public Suffix List: `a.example.co.uk` and `b.example.co.uk`), and a link from one to the
other in cached page content. `build` computes the edges in SQL with bounded work per bookmark and
stores them; `query` reads them (neighbours, stats); `export` writes GEXF, GraphML and JSON.
"""

from collections.abc import Iterable

import msgspec

from marks.library import MarksError

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


class NotBuilt(MarksError):
    pass
