"""marks: snapshots -- a 2 MB page with 50 images taken (fetched, inlined, sanitised, stored),
10,000 stored snapshots listed, and what the page store keeps as a share of the bytes fetched.

The site is an aiohttp server in a thread of this process on 127.0.0.1; images are incompressible
(random bytes), the page's text is ordinary prose, as pages are."""

import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

from run import Row

sys.path.insert(0, str(Path(__file__).parents[1] / "packages" / "marks" / "src"))

IMAGES = 50
IMAGE_BYTES = 12_000
PAGE_BYTES = 2 * 1024 * 1024
LISTED = 10_000
WORDS = ["tide", "lantern", "harbour", "keeper", "fog", "skerry", "gull", "beacon", "rope",
         "ledger", "storm", "oar", "chart", "compass", "mooring", "shoal", "swell"]  # fmt: skip


def _page(port: int) -> bytes:
    rng = random.Random(3)
    images = "".join(f'<img src="/img/{n}.png" alt="picture {n}">' for n in range(IMAGES))
    styles = '<link rel="stylesheet" href="/site.css"><script src="/app.js"></script>'
    parts, size = [], 0
    while size < PAGE_BYTES - len(images) - 400:
        paragraph = "<p>" + " ".join(rng.choice(WORDS) for _ in range(120)) + ".</p>\n"
        parts.append(paragraph)
        size += len(paragraph)
    head = f"<!doctype html><html><head><title>Two megabytes</title>{styles}</head><body>"
    return (head + images + "".join(parts) + "</body></html>").encode()


class Site:
    def __init__(self) -> None:
        rng = random.Random(5)
        self.images = {n: rng.randbytes(IMAGE_BYTES) for n in range(IMAGES)}
        self.css = b"body { font: 16px serif; background: url(/img/0.png) }"
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(20)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/page", self._page)
        app.router.add_get("/site.css", self._css)
        app.router.add_get("/img/{n}.png", self._image)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.page = _page(self.port)

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(body=self.page, content_type="text/html")

    async def _css(self, request: web.Request) -> web.Response:
        return web.Response(body=self.css, content_type="text/css")

    async def _image(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.images[int(request.match_info["n"])], content_type="image/png"
        )

    @property
    def raw_bytes(self) -> int:
        return len(self.page) + len(self.css) + sum(map(len, self.images.values()))

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _take(db: Path, url: str) -> float:
    from marks.library import Library
    from marks.snapshots.service import Snapshots
    from marks.store import Store

    store = Store(db)
    try:
        library = Library(store)
        bookmark = library.find_by_url(url) or library.add(url, title="big")
        snapshots = Snapshots(library)
        started = time.perf_counter()
        snapshots.plan([bookmark.id])
        summary = snapshots.take()
        seconds = time.perf_counter() - started
        assert summary.by_outcome == {"stored": 1}, summary
        return seconds
    finally:
        store.close()


def _stored_bytes(db: Path) -> int:
    from marks.store import Store

    store = Store(db)
    try:
        return store.value("SELECT sum(length(data)) FROM snapshot_blobs")
    finally:
        store.close()


def _listing(db: Path) -> float:
    """Median seconds of listing every snapshot, over 10,000 stored (1,000 bookmarks)."""
    from marks import clock, pagestore
    from marks.library import Library
    from marks.snapshots.service import Snapshots
    from marks.store import Store

    store = Store(db)
    try:
        library = Library(store)
        with store.transaction():
            now = clock.to_text(library.now())
            for n in range(1000):
                store.execute(
                    "INSERT INTO bookmarks (url, url_key, added) VALUES (?, ?, ?)",
                    (f"https://listed.example/{n}", f"https://listed.example/{n}", now),
                )
            first = store.value("SELECT min(id) FROM bookmarks WHERE url LIKE 'https://listed%'")
            for n in range(LISTED):
                blob = pagestore.put(store, f"<p>snapshot {n % 500}</p>".encode())
                store.execute(
                    "INSERT INTO snapshots (bookmark_id, taken_at, url, source, blob, size, title)"
                    " VALUES (?, ?, ?, 'fetch', ?, 20, ?)",
                    (first + n % 1000, now, f"https://listed.example/{n % 1000}", blob, f"t{n}"),
                )
        snapshots = Snapshots(library)
        times = []
        for _ in range(7):
            started = time.perf_counter()
            found = snapshots.list()
            times.append(time.perf_counter() - started)
            assert len(found) == LISTED
        return statistics.median(times)
    finally:
        store.close()


def run() -> list[Row]:
    site = Site()
    try:
        with tempfile.TemporaryDirectory() as directory:
            db = Path(directory) / "snapshots.db"
            url = f"http://127.0.0.1:{site.port}/page"
            takes = [_take(db, url) for _ in range(3)]
            stored = _stored_bytes(db)
            listing = _listing(Path(directory) / "listing.db")
            size = os.path.getsize(db)
    finally:
        site.close()
    raw = site.raw_bytes
    return [
        Row(f"snapshot take: {len(site.page) / 1048576:.1f} MB page, {IMAGES} images (median of 3)",
            statistics.median(takes), "s", 2.0),
        Row(f"snapshot list: {LISTED:,} stored snapshots (service, median of 7)",
            listing * 1000, "ms", 50),
        Row("stored / raw bytes: the page taken 3 times (original + snapshot, deduplicated)",
            stored / (3 * raw), "ratio"),
        Row("stored / raw bytes: one snapshot and its original (images incompressible)",
            stored / raw, "ratio"),
        Row("database file after 3 snapshots, MB", size / 1048576, "MB"),
    ]  # fmt: skip
