"""`graph build`: the edges, computed as numpy arrays with bounded work per bookmark.

Never all pairs: a tag or site shared by 50,000 bookmarks would make 1.25 billion of them.
Candidates come from windows instead. Within each tag (ancestors included) and each site, the
members are ordered by their whole tag set, so bookmarks tagged alike sit side by side, and each
is paired with the next WINDOW members only; links found in cached pages add their pairs. Each
candidate pair is then scored exactly (Jaccard over the full tag sets, same site, link), and every
bookmark keeps its NEIGHBOURS strongest edges.

SQLite reads the tables and sorts the bookmarks (its collation decides the windows' order, as
before); everything per pair is done on arrays, a chunk of bookmarks at a time, because SQLite's
engine costs 1 to 3 us a pair for each step (README, "A million bookmarks"), and a million
bookmarks make over twenty million pairs. Bookmarks are numbered 0..n-1 in id order inside the
build (`ids[i]` is the id), so "the lower id" is the lower number. Memory: the pairs are held
once, as the other end (4 bytes) and the shared tag count (2 bytes), grouped by the lower end;
weights are recomputed from them wherever they are needed (the same arithmetic, the same bits).
"""

import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.integer[Any]]  # bookmark numbers, counts: 16, 32 or 64 bits
    Floats = npt.NDArray[np.float64]

WINDOW = 10  # candidates per bookmark per tag and per site, on each side

# Pairs handled at once: each array of a chunk's pairs is 4 MB, and there are about twenty at a
# time. The candidates are gathered in larger chunks (each chunk reads every window again).
CHUNK_PAIRS = 500_000
CANDIDATE_PAIRS = 2_000_000
WRITE_ROWS = 100_000  # rows per executemany: Python tuples cost about 200 bytes a row

# Every temporary table `_build` creates: dropped before and after each build, so one connection
# (a server's, a shell's) can build again and again.
_TEMP = ("g_link", "g_linkkey")


# What a build does, in order; `build(progress=...)` is told as each one begins (the server
# shows it while a build of 100,000 bookmarks takes its seconds).
STEPS = ("tags", "sites", "candidates", "scores", "edges")


def build(
    store: Store,
    now: Callable[[], dt.datetime] = clock.now,
    progress: Callable[[str], None] | None = None,
) -> BuildReport:
    started = time.perf_counter()
    saved = store.value("PRAGMA main.cache_size")
    _give_back_freed_arrays()
    try:
        report = _build(store, now, progress or (lambda step: None))
    finally:
        store.execute(f"PRAGMA main.cache_size = {int(saved)}")
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _build(
    store: Store, now: Callable[[], dt.datetime], progress: Callable[[str], None]
) -> BuildReport:
    with store.transaction():
        _drop(store)
        try:
            progress("tags")
            ids = _ints(store, "SELECT id FROM bookmarks ORDER BY id")
            tags = _TagSets(store, ids)
            progress("sites")
            site_of, site_names = _sites(store, ids)
            progress("candidates")
            graph = _Graph(store, ids, tags, site_of)
            progress("scores")
            graph.score()
            progress("edges")
            graph.rank()
            # The index by target is built once, sorted, after the new edges are in (not grown
            # at random places by every insert); dropped and made again inside the build's
            # transaction, so a failure keeps it.
            by_target = store.value(
                "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?",
                ("graph_edges_by_target",),
            )
            if by_target:
                store.execute("DROP INDEX graph_edges_by_target")
            store.execute("DELETE FROM graph_edges")
            edges = graph.write(site_names)
            del graph
            if by_target:
                # Room for the sort that makes the index (SQLite's 2 MB default makes it spill
                # to disk), once the arrays are let go; put back by `build`.
                store.execute("PRAGMA main.cache_size = -65536")
                store.execute(by_target)
            nodes = len(ids)
            store.execute(
                "INSERT OR REPLACE INTO graph_builds (id, built_at, nodes, edges) "
                "VALUES (1, ?, ?, ?)",
                (clock.to_text(now()), nodes, edges),
            )
        finally:
            _drop(store)
    return BuildReport(nodes, edges, 0.0)


def _give_back_freed_arrays() -> None:
    """Have glibc return every freed block of 1 MB or more to the system at once.

    By default glibc raises that threshold to the size of each large block freed (up to 32 MB)
    and keeps smaller ones in its heap for reuse; the build frees hundreds of arrays of a few MB
    of varying sizes, and what the heap kept put the peak at a million at 468 MB instead of
    332 MB (419 MB with a 4 MB threshold), near the 500 MB allowed. The price is the system time
    of faulting fresh pages in again: about 4 to 8 s of CPU at a million (one loaded run each).
    A process-wide setting, harmless after the build (blocks that large are rare)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD (malloc.h)
    except (OSError, AttributeError):  # not glibc: its own allocator decides
        pass


def _drop(store: Store) -> None:
    for table in _TEMP:
        store.execute(f"DROP TABLE IF EXISTS temp.{table}")


def _ints(store: Store, sql: str, columns: int = 1) -> "Ints":
    """A query's integer rows as one array (rows x columns, flattened when one column)."""
    import itertools

    import numpy as np

    values = np.fromiter(itertools.chain.from_iterable(store.execute(sql)), np.int64)
    return values if columns == 1 else values.reshape(-1, columns)


def _numbers(ids: "Ints", found: "Ints") -> "Ints":
    """Each of `found`'s bookmark ids as its number (its place in `ids`), -1 when no bookmark."""
    import numpy as np

    at = np.searchsorted(ids, found)
    at[at >= len(ids)] = 0
    return np.where(ids[at] == found, at, -1) if len(ids) else np.full(len(found), -1)


class _TagSets:
    """Each bookmark's counted tags (its tags and their ancestors, as numbered nodes) as sorted
    keys bookmark * node_count + node: bookmark i's are `keys[start[i]:start[i + 1]]`, `count[i]`
    of them."""

    def __init__(self, store: Store, ids: "Ints") -> None:
        import numpy as np

        numbered: dict[str, int] = {}
        expand: list[tuple[int, int]] = []
        for tag_id, name in store.execute("SELECT id, name FROM tags"):
            parts = name.casefold().split("/")
            if parts[0] in IGNORED_TAG_ROOTS:
                continue
            for depth in range(1, len(parts) + 1):
                expand.append((tag_id, numbered.setdefault("/".join(parts[:depth]), len(numbered))))
        self.node_count = len(numbered)
        # The nodes of each tag, by tag id: tag t's are tag_nodes[tag_start[t]:tag_start[t + 1]].
        pairs = np.array(sorted(expand), np.int64).reshape(-1, 2)
        top = int(pairs[:, 0].max()) + 1 if len(pairs) else 1
        tag_start = np.zeros(top + 1, np.int64)
        np.cumsum(np.bincount(pairs[:, 0], minlength=top), out=tag_start[1:])
        tag_nodes = pairs[:, 1]
        rows = _ints(store, "SELECT bookmark_id, tag_id FROM bookmark_tags", 2)
        bms, tag_ids = _numbers(ids, rows[:, 0]), rows[:, 1]
        del rows
        counted = (bms >= 0) & (tag_ids < top)
        bms, tag_ids = bms[counted], tag_ids[counted]
        per_tag = tag_start[tag_ids + 1] - tag_start[tag_ids]
        # Every (bookmark, node) of every tag row, as one key bookmark * nodes + node; a node
        # reached twice (`a/b` and `a/c` both give `a`; `Dev` and `dev`) counts once.
        first = np.repeat(tag_start[tag_ids] - np.cumsum(per_tag) + per_tag, per_tag)
        node = tag_nodes[first + np.arange(len(first))]
        keys = np.unique(np.repeat(bms, per_tag) * max(self.node_count, 1) + node)
        del bms, tag_ids, per_tag, first, node
        self.keys = keys  # sorted: bookmark-major, for membership tests
        self.count = np.bincount(keys // max(self.node_count, 1), minlength=len(ids))
        self.start = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(self.count, out=self.start[1:])

    def members(self) -> tuple["Ints", "Ints"]:
        """(node, bookmark) of every membership, bookmark-major."""
        width = max(self.node_count, 1)
        return self.keys % width, self.keys // width

    def shared(self, a: "Ints", b: "Ints") -> "Ints":
        """How many counted tags bookmarks a[k] and b[k] have in common, for every k.

        Each node of the smaller set is looked up in the sorted (bookmark, node) keys of the
        other: one binary search per node, all of a round (the t-th node of each) at once."""
        import numpy as np

        small = self.count[a] <= self.count[b]
        one, other = np.where(small, a, b), np.where(small, b, a)
        length = self.count[one]
        shared = np.zeros(len(a), np.int64)
        live = np.flatnonzero((length > 0) & (self.count[other] > 0))
        width = max(self.node_count, 1)
        place = 0
        while len(live):
            node = self.keys[self.start[one[live]] + place] % width
            key = other[live] * width + node
            found = np.searchsorted(self.keys, key)
            found[found >= len(self.keys)] = 0
            shared[live] += self.keys[found] == key
            place += 1
            live = live[length[live] > place]
        return shared


def _sites(store: Store, ids: "Ints") -> tuple["Ints", list[str]]:
    """Each bookmark's registrable domain as a number (-1: none), and the domains by number."""
    import numpy as np

    numbered: dict[str, int] = {}
    of_host: dict[str, int] = {}
    for (host,) in store.execute("SELECT DISTINCT domain FROM bookmarks"):
        found = sites.site(host) if host else None
        of_host[host] = -1 if found is None else numbered.setdefault(found, len(numbered))
    site_of = np.fromiter(
        (of_host[host] for (host,) in store.execute("SELECT domain FROM bookmarks ORDER BY id")),
        np.int32,
        len(ids),
    )
    return site_of, list(numbered)


def _links(store: Store, ids: "Ints") -> tuple["Ints", "Ints"]:
    """The pairs that cached pages link, as sorted keys a * n + b (a < b), and each pair's
    flags (1: a links to b, 2: b to a, 3: both)."""
    import numpy as np

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
        "CREATE TEMP TABLE g_link (a INTEGER, b INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID"
    )
    store.execute(
        "INSERT OR IGNORE INTO g_link SELECT k.src, b.id FROM g_linkkey k "
        "JOIN bookmarks b ON b.url_key = k.url_key WHERE b.id != k.src"
    )
    rows = _ints(store, "SELECT a, b FROM g_link", 2)
    src, dst = _numbers(ids, rows[:, 0]), _numbers(ids, rows[:, 1])
    known = (src >= 0) & (dst >= 0)
    src, dst = src[known], dst[known]
    keys = np.minimum(src, dst) * len(ids) + np.maximum(src, dst)
    flags = np.where(src < dst, 1, 2)
    unique, inverse = np.unique(keys, return_inverse=True)
    combined = np.zeros(len(unique), np.int64)
    np.bitwise_or.at(combined, inverse, flags)
    return unique, combined


def _joined(parts: list[Any], dtype: Any) -> Any:
    """The parts end to end in one array; `parts` is emptied as they are copied."""
    import numpy as np

    joined = np.empty(sum(len(part) for part in parts), dtype)
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        joined[at : at + len(part)] = part
        at += len(part)
    return joined


class _Graph:
    """The candidate pairs of one build, their scores, each bookmark's last kept edge, and the
    edges written."""

    def __init__(self, store: Store, ids: "Ints", tags: _TagSets, site_of: "Ints") -> None:
        import numpy as np

        self.store, self.ids, self.tags, self.site_of = store, ids, tags, site_of
        n = self.n = len(ids)
        # The windows' orders, as SQLite sorts (its collation of `tags` and `domain`): within a
        # tag by tag set, domain and id; within a site by tag set and id.
        by_tags_domain = _numbers(
            ids, _ints(store, "SELECT id FROM bookmarks ORDER BY tags, domain, id")
        )
        by_tags = _numbers(ids, _ints(store, "SELECT id FROM bookmarks ORDER BY tags, id"))
        rank = np.empty(n, np.int64)
        # Every window's members in one sequence, group by group: a group is a tag node or a
        # site (numbered after the nodes); a pair is two members of one group at most WINDOW
        # apart. Sorting key = group * n + rank gives each group's members in order.
        node, bm = tags.members()
        rank[by_tags_domain] = np.arange(n)
        order = np.sort(node * n + rank[bm])
        del node, bm
        with_site = np.flatnonzero(site_of >= 0)
        rank[by_tags] = np.arange(n)
        site_order = np.sort(
            (site_of[with_site].astype(np.int64) + tags.node_count) * n + rank[with_site]
        )
        del with_site
        self.member = np.concatenate((by_tags_domain[order % n], by_tags[site_order % n]))
        self.member = self.member.astype(np.int32)
        self.group = np.concatenate((order // n, site_order // n)).astype(np.int32)
        del order, site_order, rank, by_tags_domain, by_tags
        self.link_keys, self.link_flags = _links(store, ids)
        # The scored pairs, grouped by the lower end (bookmark i's are at
        # start[i]:start[i + 1]): the other end and the number of shared tags.
        self.start = np.zeros(n + 1, np.int64)
        self.degree = np.zeros(n, np.int64)  # scored pairs of each bookmark, either end
        self.other = np.zeros(0, np.int32)
        self.shared_tags = np.zeros(0, np.uint16)
        # Each bookmark's last kept edge in its order (weight, other end); `last` -1: it keeps
        # all of its edges (it has NEIGHBOURS or fewer).
        self.last_weight = np.zeros(n, np.float64)
        self.last = np.full(n, -1, np.int64)

    def _chunks(self, sizes: "Ints", pairs: int = CHUNK_PAIRS) -> Iterator[tuple[int, int]]:
        """Ranges of bookmarks whose `sizes` add up to about `pairs` each."""
        import numpy as np

        ends = np.searchsorted(
            np.cumsum(sizes), np.arange(1, 1 + int(sizes.sum()) // pairs) * pairs
        )
        low = 0
        for high in [*(int(end) + 1 for end in ends), self.n]:
            if high > low:
                yield low, min(high, self.n)
                low = high

    def _candidates(self, low: int, high: int) -> "Ints":
        """The candidate pairs whose lower end is in low..high-1, as sorted keys a * n + b."""
        import numpy as np

        n = self.n
        found = []
        for k in range(1, WINDOW + 1):
            x, y = self.member[:-k], self.member[k:]
            a = np.minimum(x, y)
            pick = (a >= low) & (a < high)
            pick &= self.group[:-k] == self.group[k:]
            found.append(a[pick].astype(np.int64) * n + np.maximum(x[pick], y[pick]))
            del a, pick
        links = self.link_keys[(self.link_keys >= low * n) & (self.link_keys < high * n)]
        keys = np.concatenate((*found, links))
        del found
        keys.sort()
        if len(keys):
            keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
        return keys

    def _link(self, a: "Ints", b: "Ints") -> "Ints":
        import numpy as np

        if not len(self.link_keys):
            return np.zeros(len(a), np.int64)
        keys = a.astype(np.int64) * self.n + b
        at = np.searchsorted(self.link_keys, keys)
        at[at >= len(self.link_keys)] = 0
        return np.where(self.link_keys[at] == keys, self.link_flags[at], 0)

    def _parts(
        self, a: "Ints", b: "Ints", shared: "Ints"
    ) -> tuple["Floats", "Floats", Any, "Ints"]:
        """(weight, Jaccard, same site, link flags) of pairs a < b: the same float arithmetic as
        the rules' (a true division of the integer counts, then the weighted sum in order)."""
        import numpy as np

        j = np.zeros(len(a), np.float64)
        some = shared > 0
        j[some] = shared[some] / (
            self.tags.count[a[some]] + self.tags.count[b[some]] - shared[some]
        )
        site = self.site_of[a]
        same_site = (site >= 0) & (site == self.site_of[b])
        link = self._link(a, b)
        weight = TAG_WEIGHT * j + SITE_WEIGHT * same_site + LINK_WEIGHT * (link > 0)
        return weight, j, same_site, link

    def score(self) -> None:
        """Every candidate pair, chunk by chunk of lower ends; the ones with a reason to be an
        edge (a shared tag, a site, a link) are kept with their shared tag count."""
        import numpy as np

        n = self.n
        narrow = np.uint16 if self.tags.count.max(initial=0) < 65536 else np.int64
        raw = np.bincount(self.member, minlength=n) * WINDOW
        others: list[Any] = []
        counts: list[Any] = []
        lower = np.zeros(n, np.int64)
        for low, high in self._chunks(raw, CANDIDATE_PAIRS):
            keys = self._candidates(low, high)
            for first in range(0, len(keys), CHUNK_PAIRS):
                part = keys[first : first + CHUNK_PAIRS]
                a, b = part // n, part % n
                shared = self.tags.shared(a, b)
                site = self.site_of[a]
                reason = (shared > 0) | ((site >= 0) & (site == self.site_of[b]))
                if len(self.link_keys):
                    reason |= self._link(a, b) > 0
                lower += np.bincount(a[reason], minlength=n)
                self.degree += np.bincount(b[reason], minlength=n)
                others.append(b[reason].astype(np.int32))
                counts.append(shared[reason].astype(narrow))
                del a, b, shared, site, reason
            del keys
        del self.member, self.group  # the windows are done with
        np.cumsum(lower, out=self.start[1:])
        self.degree += lower
        # One array each, filled from the chunks as they are let go (a concatenation would hold
        # both at once: 130 MB more at a million).
        self.other = _joined(others, np.int32)
        self.shared_tags = _joined(counts, narrow)

    def rank(self) -> None:
        """Each bookmark's NEIGHBOURS-th edge in (weight descending, other end ascending) order
        over both directions, chunk by chunk of bookmarks."""
        import numpy as np

        for low, high in self._chunks(self.degree):
            out = slice(self.start[low], self.start[high])
            forward_a = np.repeat(
                np.arange(low, high, dtype=np.int32), np.diff(self.start[low : high + 1])
            )
            forward_b = self.other[out]
            forward_shared = self.shared_tags[out]
            in_chunk = self.other >= low
            in_chunk &= self.other < high
            back = np.flatnonzero(in_chunk)
            del in_chunk
            back_a = (np.searchsorted(self.start, back, side="right") - 1).astype(np.int32)
            back_b = self.other[back]
            back_shared = self.shared_tags[back]
            del back
            a = np.concatenate((forward_a, back_a))
            b = np.concatenate((forward_b, back_b))
            weight = self._parts(a, b, np.concatenate((forward_shared, back_shared)))[0]
            end = np.concatenate((forward_a, back_b))  # the end in low..high-1
            far = np.concatenate((forward_b, back_a))
            del a, b, forward_a, forward_b, forward_shared, back_a, back_b, back_shared
            order = np.lexsort((far, -weight, end))
            first = np.zeros(high - low + 1, np.int64)
            np.cumsum(np.bincount(end - low, minlength=high - low), out=first[1:])
            full = np.flatnonzero(np.diff(first) >= NEIGHBOURS)
            nth = order[first[full] + NEIGHBOURS - 1]
            self.last_weight[low + full] = weight[nth]
            self.last[low + full] = far[nth]
            del order, weight, end, far

    def _keeps(self, end: "Ints", weight: "Floats", other: "Ints") -> Any:
        """Whether `end` keeps its edge to `other`: at or before its last kept one in order
        (weight higher, or equal and the other end no higher). Floats compare exactly: the same
        arithmetic made both."""
        last = self.last[end]
        last_weight = self.last_weight[end]
        return (last < 0) | (weight > last_weight) | ((weight == last_weight) & (other <= last))

    def write(self, site_names: list[str]) -> int:
        """Append the kept edges to graph_edges in its key order; the number written."""
        import numpy as np

        names = np.array([*site_names, None], dtype=object)  # -1: no site
        written = 0
        counts = np.diff(self.start)
        for low, high in self._chunks(counts):
            out = slice(self.start[low], self.start[high])
            a = np.repeat(np.arange(low, high, dtype=np.int32), counts[low:high])
            b = self.other[out]
            weight, j, same_site, link = self._parts(a, b, self.shared_tags[out])
            kept = self._keeps(a, weight, b) | self._keeps(b, weight, a)
            a, b, weight, j, same_site, link = (
                column[kept] for column in (a, b, weight, j, same_site, link)
            )
            site = names[np.where(same_site, self.site_of[a], -1)]
            for first in range(0, len(a), WRITE_ROWS):
                part = slice(first, first + WRITE_ROWS)
                self.store.db.executemany(
                    "INSERT INTO graph_edges (source, target, weight, tags, site, link) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    zip(
                        self.ids[a[part]].tolist(),
                        self.ids[b[part]].tolist(),
                        weight[part].tolist(),
                        j[part].tolist(),
                        site[part].tolist(),
                        link[part].tolist(),
                        strict=True,
                    ),
                )
            written += len(a)
        return written
