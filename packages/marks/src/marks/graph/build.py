"""`graph build`: the edges, computed in SQL with bounded work per bookmark.

Never all pairs: a tag or site shared by 50,000 bookmarks would make 1.25 billion of them.
Candidates come from windows instead. Within each tag (ancestors included) and each site, the
members are ordered by their whole tag set, so bookmarks tagged alike sit side by side, and each
is paired with the next WINDOW members only; links found in cached pages add their pairs. Each
candidate pair is then scored exactly (Jaccard over the full tag sets, same site, link), and every
bookmark keeps its NEIGHBOURS strongest edges. Work and memory are linear in the number of
bookmarks times their tags.
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
    "g_size",
    "g_hostsite",
    "g_site",
    "g_rank",
    "g_cand",
    "g_link",
    "g_linkkey",
    "g_node",
    "g_linked",
    "g_scored",
    "g_keep",
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
    store.execute("PRAGMA temp.cache_size = -262144")
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
            # Each bookmark keeps its strongest edges; an edge stays if either end keeps it.
            store.execute(
                "CREATE TEMP TABLE g_keep (a INTEGER, b INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID"
            )
            store.execute(
                "INSERT OR IGNORE INTO g_keep SELECT min(x, y), max(x, y) FROM ("
                "  SELECT x, y, row_number() OVER (PARTITION BY x ORDER BY w DESC, y) AS r FROM ("
                "    SELECT a AS x, b AS y, w FROM g_scored UNION ALL SELECT b, a, w FROM g_scored)"
                ") WHERE r <= ?",
                (NEIGHBOURS,),
            )
            store.execute(
                "INSERT INTO graph_edges (source, target, weight, tags, site, link) "
                "SELECT s.a, s.b, s.w, s.j, s.site, s.link FROM g_keep k "
                "JOIN g_scored s ON s.a = k.a AND s.b = k.b"
            )
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
    store.execute("CREATE TEMP TABLE g_size (bm INTEGER PRIMARY KEY, n INTEGER)")
    store.execute("INSERT INTO g_size SELECT bm, count(*) FROM g_mem GROUP BY bm")


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
    store.execute(
        "CREATE TEMP TABLE g_cand (a INTEGER, b INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID"
    )
    # Within each tag: members in order of their whole tag set (alike ones adjacent).
    store.execute(
        "CREATE TEMP TABLE g_rank (grp INTEGER, rn INTEGER, bm INTEGER, PRIMARY KEY (grp, rn)) "
        "WITHOUT ROWID"
    )
    store.execute(
        "INSERT INTO g_rank SELECT m.node, row_number() OVER "
        "(PARTITION BY m.node ORDER BY b.tags, b.domain, m.bm), m.bm "
        "FROM g_mem m JOIN bookmarks b ON b.id = m.bm"
    )
    _pair_windows(store)
    # Within each site: the same, by tags then id.
    store.execute("DELETE FROM g_rank")
    store.execute(
        "INSERT INTO g_rank SELECT dense_rank() OVER (ORDER BY s.site), row_number() OVER "
        "(PARTITION BY s.site ORDER BY b.tags, s.bm), s.bm "
        "FROM g_site s JOIN bookmarks b ON b.id = s.bm"
    )
    _pair_windows(store)
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
    store.execute("INSERT OR IGNORE INTO g_cand SELECT min(a, b), max(a, b) FROM g_link")


def _pair_windows(store: Store) -> None:
    store.execute(
        "INSERT OR IGNORE INTO g_cand "
        "SELECT min(x.bm, y.bm), max(x.bm, y.bm) FROM g_rank x JOIN g_rank y "
        "ON y.grp = x.grp AND y.rn > x.rn AND y.rn <= x.rn + ? WHERE x.bm != y.bm",
        (WINDOW,),
    )


def _score(store: Store) -> None:
    """Exact Jaccard, same site and links for every candidate pair (each computed once), in one
    pass over the candidates: the shared tags are counted as the pairs stream by, each pair's two
    bookmarks looked up once (their tag count and site in one row), and only pairs with a reason
    to be an edge are written. (Writing every pair's count to a table and then every pair's parts
    to another, read back and filtered, was two thirds of a build at a million bookmarks.)"""
    store.execute("CREATE TEMP TABLE g_node (bm INTEGER PRIMARY KEY, n INTEGER, site TEXT)")
    store.execute(
        "INSERT INTO g_node SELECT bm, max(n), max(site) FROM ("
        "  SELECT bm, n, NULL AS site FROM g_size UNION ALL SELECT bm, NULL, site FROM g_site"
        ") GROUP BY bm"
    )
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
    # The shared counts come from an aggregate over g_cand in (a, b) order (no sort); SQLite runs
    # it as a co-routine feeding the outer join, so no pair is written before it is kept.
    store.execute(
        "WITH shared AS ("
        "  SELECT c.a, c.b, count(mb.bm) AS k FROM g_cand c "
        "  LEFT JOIN g_mem ma ON ma.bm = c.a "
        "  LEFT JOIN g_mem mb ON mb.bm = c.b AND mb.node = ma.node GROUP BY c.a, c.b), "
        "parts AS ("
        "  SELECT s.a, s.b, "
        "    CASE WHEN s.k > 0 THEN s.k * 1.0 / (na.n + nb.n - s.k) ELSE 0 END AS j, "
        "    CASE WHEN na.site = nb.site THEN na.site END AS site, "
        "    coalesce(l.link, 0) AS link "
        "  FROM shared s "
        "  LEFT JOIN g_node na ON na.bm = s.a LEFT JOIN g_node nb ON nb.bm = s.b "
        "  LEFT JOIN g_linked l ON l.a = s.a AND l.b = s.b) "
        "INSERT INTO g_scored SELECT a, b, "
        f"  {TAG_WEIGHT} * j + {SITE_WEIGHT} * (site IS NOT NULL) + {LINK_WEIGHT} * (link > 0), "
        "  j, site, link FROM parts WHERE j > 0 OR site IS NOT NULL OR link > 0"
    )
