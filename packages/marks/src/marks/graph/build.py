"""`graph build`: the edges, computed in SQL (and one Python function) with bounded work per
bookmark.

Never all pairs: a tag or site shared by 50,000 bookmarks would make 1.25 billion of them.
Candidates come from windows instead. Within each tag (ancestors included) and each site, the
members are ordered by their whole tag set, so bookmarks tagged alike sit side by side, and each
is paired with the next WINDOW members only; links found in cached pages add their pairs. Each
candidate pair is then scored exactly (Jaccard over the full tag sets, same site, link), and every
bookmark keeps its NEIGHBOURS strongest edges. Work and memory are linear in the number of
bookmarks times their tags; every pass reads and writes its tables in key order (a sort first
where needed), never at random places of a table larger than the cache.
"""

import datetime as dt
import time
from collections.abc import Callable, Iterator

from marks import clock
from marks.graph import (
    IGNORED_TAG_ROOTS,
    LINK_WEIGHT,
    NEIGHBOURS,
    SITE_WEIGHT,
    TAG_WEIGHT,
    BuildReport,
    links,
    sites,
)
from marks.store import Store

WINDOW = 10  # candidates per bookmark per tag and per site, on each side

# Every temporary table `_build` creates: dropped before and after each build, so one connection
# (a server's, a shell's) can build again and again.
_TEMP = (
    "g_expand",
    "g_mem",
    "g_hostsite",
    "g_site",
    "g_rank",
    "g_cand",
    "g_link",
    "g_linkkey",
    "g_linked",
    "g_scored",
    "g_nth",
)


# What a build does, in order; `build(progress=...)` is told as each one begins (the server
# shows it while a build of 100,000 bookmarks takes its ten seconds).
STEPS = ("tags", "sites", "candidates", "scores", "edges")


def build(
    store: Store,
    now: Callable[[], dt.datetime] = clock.now,
    progress: Callable[[str], None] | None = None,
) -> BuildReport:
    started = time.perf_counter()
    # Room for the temporary tables and the new edges' index pages in memory (SQLite's 2 MB
    # default makes the sorts spill to disk); put back afterwards.
    saved = [store.value(f"PRAGMA {schema}.cache_size") for schema in ("main", "temp")]
    store.execute("PRAGMA main.cache_size = -65536")
    # 128 MB for the temporary tables: every pass now reads and writes them in key order, so the
    # cache holds only the lookup tables (g_site, g_nth: about 25 MB each at a million) and the
    # pages in flight; 256 MB (for the random inserts of before) put the peak at a million, with
    # the tag sets of `_score`, at 565 MB.
    store.execute("PRAGMA temp.cache_size = -131072")
    try:
        report = _build(store, now, progress or (lambda step: None))
    finally:
        store.execute(f"PRAGMA main.cache_size = {int(saved[0])}")
        store.execute(f"PRAGMA temp.cache_size = {int(saved[1])}")
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _build(
    store: Store, now: Callable[[], dt.datetime], progress: Callable[[str], None]
) -> BuildReport:
    with store.transaction():
        _drop(store)
        try:
            progress("tags")
            _members(store)
            progress("sites")
            _sites(store)
            progress("candidates")
            _candidates(store)
            progress("scores")
            _score(store)
            progress("edges")
            # The index by target is built once, sorted, after the new edges are in (not grown
            # at random places by every insert: a third of this step at a million bookmarks);
            # dropped and made again inside the build's transaction, so a failure keeps it.
            by_target = store.value(
                "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?",
                ("graph_edges_by_target",),
            )
            if by_target:
                store.execute("DROP INDEX graph_edges_by_target")
            store.execute("DELETE FROM graph_edges")
            _keep(store)
            if by_target:
                store.execute(by_target)
            nodes = store.value("SELECT count(*) FROM bookmarks")
            edges = store.value("SELECT count(*) FROM graph_edges")
            store.execute(
                "INSERT OR REPLACE INTO graph_builds (id, built_at, nodes, edges) "
                "VALUES (1, ?, ?, ?)",
                (clock.to_text(now()), nodes, edges),
            )
        finally:
            _drop(store)
    return BuildReport(nodes, edges, 0.0)


def _drop(store: Store) -> None:
    for table in _TEMP:
        store.execute(f"DROP TABLE IF EXISTS temp.{table}")


def _members(store: Store) -> None:
    """g_mem(node, bm): each bookmark in each of its counted tags and their ancestors."""
    nodes: dict[str, int] = {}
    expand: list[tuple[int, int]] = []
    for tag_id, name in store.execute("SELECT id, name FROM tags"):
        parts = name.casefold().split("/")
        if parts[0] in IGNORED_TAG_ROOTS:
            continue
        for depth in range(1, len(parts) + 1):
            node = nodes.setdefault("/".join(parts[:depth]), len(nodes) + 1)
            expand.append((tag_id, node))
    store.execute("CREATE TEMP TABLE g_expand (tag_id INTEGER, node INTEGER)")
    store.db.executemany("INSERT INTO g_expand VALUES (?, ?)", expand)
    store.execute(
        "CREATE TEMP TABLE g_mem (node INTEGER, bm INTEGER, PRIMARY KEY (node, bm)) WITHOUT ROWID"
    )
    store.execute(
        "INSERT OR IGNORE INTO g_mem SELECT e.node, bt.bookmark_id "
        "FROM bookmark_tags bt JOIN g_expand e ON e.tag_id = bt.tag_id"
    )
    store.execute("CREATE INDEX temp.g_mem_by_bm ON g_mem (bm, node)")


def _sites(store: Store) -> None:
    """g_site(bm, site): each bookmark's registrable domain (looked up once per host)."""
    store.execute("CREATE TEMP TABLE g_hostsite (host TEXT PRIMARY KEY, site TEXT)")
    hosts = [row[0] for row in store.execute("SELECT DISTINCT domain FROM bookmarks")]
    store.db.executemany(
        "INSERT INTO g_hostsite VALUES (?, ?)",
        [(host, sites.site(host)) for host in hosts if host],
    )
    store.execute("CREATE TEMP TABLE g_site (bm INTEGER PRIMARY KEY, site TEXT NOT NULL)")
    store.execute(
        "INSERT INTO g_site SELECT b.id, h.site FROM bookmarks b "
        "JOIN g_hostsite h ON h.host = b.domain WHERE h.site IS NOT NULL"
    )
    store.execute("CREATE INDEX temp.g_site_by_site ON g_site (site)")
    store.execute("DROP TABLE temp.g_hostsite")


def _candidates(store: Store) -> None:
    """g_cand(a, b): every candidate pair once, a < b.

    The pairs of all windows and links are collected unsorted and sorted once by SQLite's sorter
    (sequential merges), then appended to g_cand in key order: inserting them as they come put
    each at a random place of a B-tree of tens of millions of pairs, larger than the cache (at a
    million bookmarks most of the build's time went to that I/O)."""
    # Within each tag: members in order of their whole tag set (alike ones adjacent); within each
    # site the same, by tags then id. Sites are numbered below zero, tags above.
    store.execute(
        "CREATE TEMP TABLE g_rank (grp INTEGER, rn INTEGER, bm INTEGER, PRIMARY KEY (grp, rn)) "
        "WITHOUT ROWID"
    )
    store.execute(
        "INSERT INTO g_rank SELECT -dense_rank() OVER (ORDER BY s.site), row_number() OVER "
        "(PARTITION BY s.site ORDER BY b.tags, s.bm), s.bm "
        "FROM g_site s JOIN bookmarks b ON b.id = s.bm"
    )
    store.execute(
        "INSERT INTO g_rank SELECT m.node, row_number() OVER "
        "(PARTITION BY m.node ORDER BY b.tags, b.domain, m.bm), m.bm "
        "FROM g_mem m JOIN bookmarks b ON b.id = m.bm"
    )
    # Links in cached pages, matched to bookmarks by url_key.
    store.execute(
        "CREATE TEMP TABLE g_link (a INTEGER, b INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID"
    )
    from marks import urls

    def keyed() -> Iterator[tuple[int, str]]:
        for bookmark_id, url in links.cached_links(store):
            try:
                yield bookmark_id, urls.key(url)
            except ValueError:
                continue

    store.execute("CREATE TEMP TABLE g_linkkey (src INTEGER, url_key TEXT)")
    store.db.executemany("INSERT INTO g_linkkey VALUES (?, ?)", keyed())
    store.execute(
        "INSERT OR IGNORE INTO g_link SELECT k.src, b.id FROM g_linkkey k "
        "JOIN bookmarks b ON b.url_key = k.url_key WHERE b.id != k.src"
    )
    store.execute("DROP TABLE temp.g_linkkey")
    store.execute(
        "CREATE TEMP TABLE g_cand (a INTEGER, b INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID"
    )
    store.execute(
        "INSERT OR IGNORE INTO g_cand SELECT a, b FROM ("
        "  SELECT min(x.bm, y.bm) AS a, max(x.bm, y.bm) AS b FROM g_rank x JOIN g_rank y "
        "  ON y.grp = x.grp AND y.rn > x.rn AND y.rn <= x.rn + ? WHERE x.bm != y.bm "
        "  UNION ALL SELECT min(a, b), max(a, b) FROM g_link"
        ") ORDER BY a, b",
        (WINDOW,),
    )


def _score(store: Store) -> None:
    """Exact Jaccard, same site and links for every candidate pair (each computed once), in one
    pass over the candidates in key order; only pairs with a reason to be an edge are written.

    The Jaccard index is computed by a Python function over each bookmark's counted tags, held
    as one frozenset per distinct tag set (bookmarks tagged alike share it): counting the shared
    tags in SQL took a seek per tag of one bookmark into the other's, an aggregate and a lookup
    of both tag counts per pair, about twice the time of the call."""
    tag_sets = _tag_sets(store)

    def jaccard(a: int, b: int) -> float:
        one, other = tag_sets[a], tag_sets[b]
        shared = len(one & other)
        # The same division SQLite did (exact integers, one correctly rounded quotient).
        return shared / (len(one) + len(other) - shared) if shared else 0.0

    # Called with two bookmark ids only (apsw's stub types every function as taking any value).
    store.db.create_scalar_function(
        "marks_graph_jaccard",
        jaccard,  # type: ignore[arg-type]
        2,
        deterministic=True,
    )
    try:
        _score_pairs(store)
    finally:
        store.db.create_scalar_function("marks_graph_jaccard", None)


def _tag_sets(store: Store) -> list[frozenset[int]]:
    """Each bookmark's counted tags (its nodes in g_mem), indexed by its id (a list: 8 bytes a
    bookmark), one frozenset per distinct set (bookmarks tagged alike share it)."""
    empty: frozenset[int] = frozenset()
    tag_sets = [empty] * ((store.value("SELECT max(id) FROM bookmarks") or 0) + 1)
    distinct = {empty: empty}
    nodes: dict[int, int] = {}  # one int object per node, not one per row (28 bytes each)
    current: list[int] = []
    previous = 0
    for bm, node in store.execute("SELECT bm, node FROM g_mem ORDER BY bm"):
        node = nodes.setdefault(node, node)
        if bm != previous:
            found = frozenset(current)
            tag_sets[previous] = distinct.setdefault(found, found)
            current, previous = [], bm
        current.append(node)
    found = frozenset(current)
    tag_sets[previous] = distinct.setdefault(found, found)
    return tag_sets


def _score_pairs(store: Store) -> None:
    # Each pair's link flags (1: a links to b, 2: b to a), from the few links cached pages hold.
    store.execute(
        "CREATE TEMP TABLE g_linked (a INTEGER, b INTEGER, link INTEGER, PRIMARY KEY (a, b)) "
        "WITHOUT ROWID"
    )
    store.execute(
        "INSERT INTO g_linked SELECT min(a, b), max(a, b), sum(CASE WHEN a < b THEN 1 ELSE 2 END) "
        "FROM g_link GROUP BY min(a, b), max(a, b)"
    )
    store.execute(
        "CREATE TEMP TABLE g_scored (a INTEGER, b INTEGER, w REAL, j REAL, site TEXT, "
        "link INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID"
    )
    # `LIMIT -1` keeps the subquery a co-routine: flattened into the outer query, the function
    # would be called once for each of the three places its value is used.
    store.execute(
        "WITH scored AS ("
        "  SELECT c.a, c.b, marks_graph_jaccard(c.a, c.b) AS j FROM g_cand c LIMIT -1), "
        "parts AS ("
        "  SELECT s.a, s.b, s.j, "
        "    CASE WHEN sa.site = sb.site THEN sa.site END AS site, "
        "    coalesce(l.link, 0) AS link "
        "  FROM scored s "
        "  LEFT JOIN g_site sa ON sa.bm = s.a LEFT JOIN g_site sb ON sb.bm = s.b "
        "  LEFT JOIN g_linked l ON l.a = s.a AND l.b = s.b) "
        "INSERT INTO g_scored SELECT a, b, "
        f"  {TAG_WEIGHT} * j + {SITE_WEIGHT} * (site IS NOT NULL) + {LINK_WEIGHT} * (link > 0), "
        "  j, site, link FROM parts WHERE j > 0 OR site IS NOT NULL OR link > 0"
    )


def _keep(store: Store) -> None:
    """Each bookmark keeps its NEIGHBOURS strongest edges (ties: the lower other id first); an edge
    stays if either end keeps it.

    One sort of both directions of every scored pair finds each bookmark's last kept edge
    (g_nth: its weight and other end; only bookmarks with more edges than NEIGHBOURS have one);
    then one pass over g_scored in key order writes the edges that either end keeps, appended to
    graph_edges in its own key order. (Ranking every pair, collecting the kept ones into a table
    at random places and joining it back to the scores was two of the build's passes more.)"""
    store.execute("CREATE TEMP TABLE g_nth (x INTEGER PRIMARY KEY, w REAL, y INTEGER)")
    store.execute(
        "INSERT INTO g_nth SELECT x, w, y FROM ("
        "  SELECT x, y, w, row_number() OVER (PARTITION BY x ORDER BY w DESC, y) AS r FROM ("
        "    SELECT a AS x, b AS y, w FROM g_scored UNION ALL SELECT b, a, w FROM g_scored)"
        ") WHERE r = ?",
        (NEIGHBOURS,),
    )
    # (w, other) at or before the end's last kept edge in its order: w higher, or equal and the
    # other id no higher. Floats compare exactly: both sides are the same stored values.
    store.execute(
        "INSERT INTO graph_edges (source, target, weight, tags, site, link) "
        "SELECT s.a, s.b, s.w, s.j, s.site, s.link FROM g_scored s "
        "LEFT JOIN g_nth na ON na.x = s.a LEFT JOIN g_nth nb ON nb.x = s.b "
        "WHERE na.x IS NULL OR s.w > na.w OR (s.w = na.w AND s.b <= na.y) "
        "OR nb.x IS NULL OR s.w > nb.w OR (s.w = nb.w AND s.a <= nb.y) "
        "ORDER BY s.a, s.b"
    )
