"""Reading the stored graph: a bookmark's neighbours with the reasons, and whole-graph stats."""

from marks.graph import Connected, GraphStats, Neighbour, NotBuilt, counted_tags
from marks.store import Store

_LINK = {1: "to", 2: "from", 3: "both"}
_LINK_WHY = {1: "links to it", 2: "linked from it", 3: "links both ways"}


def built_at(store: Store) -> str | None:
    return store.value("SELECT built_at FROM graph_builds WHERE id = 1")


def require_built(store: Store) -> str:
    when = built_at(store)
    if when is None:
        raise NotBuilt("the graph is not built yet: run `marks graph build`")
    return when


def _most_specific(shared: set[str]) -> list[str]:
    """`dev`, `dev/python` -> `dev/python` (the ancestor says nothing more)."""
    return sorted(t for t in shared if not any(o.startswith(t + "/") for o in shared))


def neighbours(store: Store, bookmark_id: int, limit: int = 10) -> list[Neighbour]:
    from marks.library import NotFound

    require_built(store)
    row = store.one("SELECT tags FROM bookmarks WHERE id = ?", (bookmark_id,))
    if row is None:
        raise NotFound(f"no bookmark with id {bookmark_id}")
    mine = counted_tags(row[0].split("\n"))
    found = []
    for other, weight, jaccard, site, link, url, title, tags in store.execute(
        "SELECT e.other, e.weight, e.tags, e.site, e.link, b.url, b.title, b.tags FROM ("
        "  SELECT target AS other, weight, tags, site, link FROM graph_edges WHERE source = ?1"
        "  UNION ALL"
        "  SELECT source, weight, tags, site, "
        "    CASE link WHEN 1 THEN 2 WHEN 2 THEN 1 ELSE link END FROM graph_edges WHERE target = ?1"
        ") e JOIN bookmarks b ON b.id = e.other ORDER BY e.weight DESC, e.other LIMIT ?2",
        (bookmark_id, limit),
    ):
        shared = _most_specific(mine & counted_tags(tags.split("\n")))
        why = []
        if shared:
            why.append(f"tags {', '.join(shared)} ({jaccard:.2f})")
        if site:
            why.append(f"same site {site}")
        if link:
            why.append(_LINK_WHY[link])
        found.append(
            Neighbour(
                id=other,
                url=url,
                title=title,
                weight=weight,
                shared_tags=shared,
                site=site,
                link=_LINK.get(link),
                why="; ".join(why),
            )
        )
    return found


def stats(store: Store, top: int = 10) -> GraphStats:
    when = require_built(store)
    nodes = store.value("SELECT count(*) FROM bookmarks")
    edges = store.value("SELECT count(*) FROM graph_edges")
    # Components by union-find over the stored edges (at most NEIGHBOURS per bookmark).
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for source, target in store.execute("SELECT source, target FROM graph_edges"):
        a, b = root(source), root(target)
        if a != b:
            parent[max(a, b)] = min(a, b)
    sizes: dict[int, int] = {}
    for node in list(parent):
        r = root(node)
        sizes[r] = sizes.get(r, 0) + 1
    connected = len(parent)
    isolated = nodes - connected
    most = [
        Connected(bookmark_id, title, degree)
        for bookmark_id, title, degree in store.execute(
            "SELECT d.id, b.title, d.degree FROM ("
            "  SELECT id, count(*) AS degree FROM ("
            "    SELECT source AS id FROM graph_edges UNION ALL SELECT target FROM graph_edges)"
            "  GROUP BY id) d JOIN bookmarks b ON b.id = d.id "
            "ORDER BY d.degree DESC, d.id LIMIT ?",
            (top,),
        )
    ]
    return GraphStats(
        nodes=nodes,
        edges=edges,
        components=len(sizes) + isolated,
        isolated=isolated,
        largest_component=max(sizes.values(), default=1 if nodes else 0),
        density=round(2 * edges / (nodes * (nodes - 1)), 8) if nodes > 1 else 0.0,
        most_connected=most,
        built_at=when,
    )
