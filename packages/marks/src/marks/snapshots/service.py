"""Snapshots (service layer): taking, capturing, listing, reading, exporting, deleting, pruning.

`take` fetches each planned page once, through the same fetch as page content
(`content.fetch_page`, `marks.webclient`'s rules: per-host limits, timeouts, TLS verified,
`.invalid` never resolved), and that one fetch serves both: the page is kept as the bookmark's
content (its text feeds the full-text index) and, inlined and sanitised, as a snapshot. Bodies
live once in the page store (`marks.pagestore`). `capture` takes a page the browser extension
serialised: capped and sanitised again here, since the server trusts no client.
"""

import asyncio
import datetime as dt
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import apsw
import msgspec

from marks import clock, content, extract, pagestore, webclient, worklist
from marks.health import Options
from marks.library import Invalid, Library, NotFound
from marks.snapshots import sanitise
from marks.snapshots.inline import Inliner
from marks.wire import LeftOut, Snapshot, SnapshotResult

MAX_MB = 20
WEB = ("http://", "https://")
_omitted = msgspec.json.Decoder(tuple[LeftOut, ...])
_listing = msgspec.json.Decoder(list[Snapshot])


@dataclass
class TakeSummary:
    planned: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    skipped: list[SnapshotResult] = field(default_factory=list)  # not web pages, with the reason
    seconds: float = 0.0

    def add(self, item: SnapshotResult) -> None:
        self.by_outcome[item.outcome] = self.by_outcome.get(item.outcome, 0) + 1


@dataclass
class _Taken:
    fetched: content.Fetched
    html: bytes | None = None
    omitted: list[LeftOut] = field(default_factory=list)
    error: str = ""
    too_large: bool = False


def _skip_reason(url: str) -> str:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "javascript":
        return "a bookmarklet (javascript:) is not a page"
    return f"not a web page ({scheme or 'no'}: scheme): only http(s) pages are snapshotted"


def _when(text: str) -> dt.datetime:
    moment = clock.from_text(text)
    assert moment is not None, "taken_at is NOT NULL"
    return moment


class Snapshots:
    def __init__(self, library: Library, options: Options | None = None, max_mb: float = MAX_MB):
        self.library = library
        self.store = library.store
        self.options = options or Options()
        self.max_bytes = int(max_mb * 1024 * 1024)

    # --- choosing --------------------------------------------------------------------------------

    def plan(
        self,
        ids: Sequence[int] = (),
        where: str = "",
        bindings: "Sequence[apsw.SQLiteValue]" = (),
        missing: bool = False,
    ) -> tuple[int, list[SnapshotResult]]:
        """Plan the pages `take` fetches; answer their number and the bookmarks skipped (with
        the reason: only http(s) pages can be snapshotted)."""
        if not (ids or where or missing):
            raise Invalid("say which pages: IDS, --query EXPR or --missing")
        clauses, values = content.selection(self.library, ids, where, bindings)
        if missing:
            clauses.append(
                "NOT EXISTS (SELECT 1 FROM snapshots s WHERE s.bookmark_id = bookmarks.id)"
            )
        condition = " AND ".join(f"({c})" for c in clauses)
        web = "(lower(substr(url, 1, 7)) = 'http://' OR lower(substr(url, 1, 8)) = 'https://')"
        skipped = [
            SnapshotResult(bookmark_id=i, url=u, outcome="skipped", detail=_skip_reason(u))
            for i, u in self.store.execute(
                f"SELECT id, url FROM bookmarks WHERE {condition} AND NOT {web} ORDER BY id",
                values,
            )
        ]
        self.store.execute(
            "CREATE TEMP TABLE IF NOT EXISTS snapshot_plan "
            "(seq INTEGER PRIMARY KEY, bookmark_id INTEGER, url TEXT)"
        )
        self.store.execute("DELETE FROM temp.snapshot_plan")
        self.store.execute(
            "INSERT INTO temp.snapshot_plan (bookmark_id, url) SELECT id, url FROM ("
            "SELECT id, url, domain, row_number() OVER (PARTITION BY domain ORDER BY id) AS turn "
            f"FROM bookmarks WHERE {condition} AND {web}) ORDER BY turn, domain, id",
            values,
        )
        return self.store.value("SELECT count(*) FROM temp.snapshot_plan"), skipped

    # --- taking ----------------------------------------------------------------------------------

    def take(
        self,
        *,
        on_result: Callable[[SnapshotResult], None] = lambda item: None,
        summary: TakeSummary | None = None,
    ) -> TakeSummary:
        """Snapshot the planned pages (call `plan` first); each is stored as it finishes, so an
        interruption keeps every page done so far."""
        summary = summary or TakeSummary()
        summary.planned = self.store.value("SELECT count(*) FROM temp.snapshot_plan")
        started = time.monotonic()
        pages = content.Content(self.library, self.options)

        def finished(item: tuple[int, str], taken: _Taken) -> None:
            result = self._keep(pages, item[0], item[1], taken)
            summary.add(result)
            on_result(result)

        try:
            asyncio.run(self._take_all(finished))
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise KeyboardInterrupt from None
        finally:
            summary.seconds = time.monotonic() - started
        return summary

    async def _take_all(self, finished: Callable[[tuple[int, str], _Taken], None]) -> None:
        settings = webclient.ClientSettings(
            self.options.concurrency, self.options.per_host, self.options.timeout
        )
        # Pages run a few at a time: each fetches its resources at once (the per-host limit
        # of the shared session still holds).
        scheduler: webclient.Scheduler[tuple[int, str], _Taken] = webclient.Scheduler(
            max(1, settings.concurrency // 4), settings.per_host
        )
        async with webclient.session(settings) as session:
            await scheduler.run(
                worklist.rows(self.store, "temp.snapshot_plan"),
                lambda item: webclient.host_of(item[1]),
                lambda item: self.snapshot_page(session, item[1]),
                finished,
            )

    async def snapshot_page(self, session: aiohttp.ClientSession, url: str) -> _Taken:
        """Fetch one page and everything it needs; inline and sanitise it (nothing stored)."""
        fetched = await content.fetch_page(session, url, None, self.max_bytes)
        taken = _Taken(fetched)
        if fetched.error or fetched.too_large:
            taken.error = fetched.error or f"larger than the {self.max_bytes / 1048576:g} MB cap"
            taken.too_large = fetched.too_large
            return taken
        if extract.kind_of(fetched.content_type, fetched.final_url) != "html":
            taken.error = f"not an HTML page ({fetched.content_type or 'unknown type'})"
            return taken

        async def fetch(resource: str, limit: int) -> content.Fetched:
            if not resource.lower().startswith(WEB):
                return content.Fetched(final_url=resource, error="not a web URL")
            # A resource of the page the user chose: only that page's own host may be private.
            with webclient.led_from(url):
                return await content.fetch_page(session, resource, None, limit)

        inliner = Inliner(fetch, self.max_bytes, used=len(fetched.body))
        html = await inliner.page(extract.decode(fetched.body, fetched.charset), fetched.final_url)
        taken.html = html.encode("utf-8")
        taken.omitted = [LeftOut(o.url, o.reason) for o in inliner.omitted]
        if len(taken.html) > self.max_bytes:
            taken.html, taken.too_large = None, True
            taken.error = f"larger than the {self.max_bytes / 1048576:g} MB cap even without images"
        return taken

    def _keep(
        self, pages: content.Content, bookmark_id: int, url: str, taken: _Taken
    ) -> SnapshotResult:
        result = SnapshotResult(bookmark_id=bookmark_id, url=url, outcome="failed")
        with self.store.transaction():
            title = ""
            if not taken.fetched.error and not taken.fetched.too_large:
                # The same fetch, kept as the bookmark's content (its text is searched).
                title = pages.keep(bookmark_id, url, taken.fetched).title
            if taken.html is None:
                result.outcome = "too_large" if taken.too_large else "failed"
                result.detail = taken.error
                return result
            result.snapshot = self._store(
                bookmark_id, taken.fetched.final_url or url, "fetch", taken.html, title,
                taken.omitted,
            )  # fmt: skip
        result.outcome = "stored"
        if taken.omitted:
            result.detail = f"{len(taken.omitted)} resource(s) left out"
        return result

    def _store(
        self,
        bookmark_id: int,
        url: str,
        source: str,
        html: bytes,
        title: str,
        omitted: list[LeftOut],
    ) -> Snapshot:
        taken_at = self.library.now()
        blob = pagestore.put(self.store, html)
        snapshot_id = self.store.value(
            "INSERT INTO snapshots (bookmark_id, taken_at, url, source, blob, size, title, "
            "omitted) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                bookmark_id,
                clock.to_text(taken_at),
                url,
                source,
                blob,
                len(html),
                title,
                msgspec.json.encode(omitted).decode(),
            ),
        )
        return Snapshot(
            id=snapshot_id, bookmark_id=bookmark_id, taken_at=taken_at, url=url, source=source,
            size=len(html), title=title, omitted=tuple(omitted),
        )  # fmt: skip

    # --- captures from the browser ---------------------------------------------------------------

    def capture(self, bookmark_id: int, html: bytes, url: str = "", title: str = "") -> Snapshot:
        """Keep a page the browser serialised (the user's view, logged in): capped, sanitised
        again, and its text kept as the bookmark's content (so search finds it)."""
        bookmark = self.library.get(bookmark_id)
        if len(html) > self.max_bytes:
            raise Invalid(f"the snapshot is larger than the {self.max_bytes / 1048576:g} MB cap")
        try:
            text = html.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid("the snapshot is not UTF-8 HTML") from None
        clean = sanitise.clean(text).encode("utf-8")
        page_url = url if url.lower().startswith(WEB) else bookmark.url
        title = title or extract.html_meta(clean.decode("utf-8")).title
        fetched = content.Fetched(
            status=200, final_url=page_url, content_type="text/html", charset="utf-8", body=clean
        )
        with self.store.transaction():
            content.Content(self.library).keep(bookmark_id, page_url, fetched)
            return self._store(bookmark_id, page_url, "browser", clean, title, [])

    # --- reading ---------------------------------------------------------------------------------

    _COLUMNS = "id, bookmark_id, taken_at, url, source, size, title, omitted"

    @staticmethod
    def _row(row: tuple) -> Snapshot:
        return Snapshot(
            id=row[0], bookmark_id=row[1], taken_at=_when(row[2]), url=row[3],
            source=row[4], size=row[5], title=row[6],
            omitted=() if row[7] == "[]" else _omitted.decode(row[7]),
        )  # fmt: skip

    def list(self, ids: Sequence[int] = ()) -> list[Snapshot]:
        """Snapshots of these bookmarks (all when none are named), newest first."""
        where, values = "", list(ids)
        if ids:
            for bookmark_id in ids:
                self.library.get(bookmark_id)
            where = f"WHERE bookmark_id IN ({','.join('?' * len(ids))})"
        # SQLite writes the JSON and msgspec reads it into Structs: ten times faster at 10,000
        # snapshots than a Python loop over rows (measured: `make bench`).
        document = self.store.value(
            "SELECT json_group_array(json_object('id', id, 'bookmark_id', bookmark_id, "
            "'taken_at', taken_at, 'url', url, 'source', source, 'size', size, 'title', title, "
            f"'omitted', json(omitted))) FROM (SELECT * FROM snapshots {where} ORDER BY id DESC)",
            values,
        )
        return _listing.decode(document)

    def get(self, snapshot_id: int) -> Snapshot:
        row = self.store.one(f"SELECT {self._COLUMNS} FROM snapshots WHERE id = ?", (snapshot_id,))
        if row is None:
            raise NotFound(f"no snapshot {snapshot_id}")
        return self._row(row)

    def html(self, snapshot_id: int) -> bytes:
        blob = self.store.value("SELECT blob FROM snapshots WHERE id = ?", (snapshot_id,))
        body = None if blob is None else pagestore.get(self.store, blob)
        if body is None:
            raise NotFound(f"no snapshot {snapshot_id}")
        return body

    def text(self, snapshot_id: int) -> str:
        meta = self.get(snapshot_id)
        page = extract.Page(meta.url, "text/html", "utf-8", self.html(snapshot_id))
        return extract.html_text(page).text

    def export(self, snapshot_id: int, path: Path) -> int:
        """Write the snapshot's HTML to `path` (atomically: all of it or nothing)."""
        body = self.html(snapshot_id)
        target = Path(path)
        if target.is_dir():
            raise Invalid(f"{target} is a directory")
        if not target.parent.is_dir():
            raise Invalid(f"directory {target.parent} does not exist")
        fd, temporary = tempfile.mkstemp(prefix=".marks-snapshot-", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(body)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return len(body)

    # --- removing --------------------------------------------------------------------------------

    def delete(self, snapshot_ids: Sequence[int]) -> int:
        with self.store.transaction():
            blobs = []
            for snapshot_id in snapshot_ids:
                blob = self.store.value(
                    "DELETE FROM snapshots WHERE id = ? RETURNING blob", (snapshot_id,)
                )
                if blob is None:
                    raise NotFound(f"no snapshot {snapshot_id}")
                blobs.append(blob)
            pagestore.collect(self.store, blobs)
        return len(blobs)

    def prune(self, keep: int) -> int:
        """Keep the `keep` newest snapshots of each bookmark; answer how many went."""
        if keep < 0:
            raise Invalid("--keep must be 0 or more")
        with self.store.transaction():
            blobs = [
                blob
                for (blob,) in self.store.execute(
                    "DELETE FROM snapshots WHERE id IN (SELECT id FROM (SELECT id, row_number() "
                    "OVER (PARTITION BY bookmark_id ORDER BY id DESC) AS n FROM snapshots) "
                    "WHERE n > ?) RETURNING blob",
                    (keep,),
                )
            ]
            pagestore.collect(self.store, blobs)
        return len(blobs)
