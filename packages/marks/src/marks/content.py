"""Page content (service layer): fetching pages, keeping the original and its readable text.

`refresh` fetches with the shared client rules (`webclient`), at most `MAX_BYTES` per page, and
asks again with `If-None-Match` / `If-Modified-Since` so unchanged pages are not downloaded twice.
The original is kept once in the page store (`marks.pagestore`, shared with snapshots), the text
goes into `page_content.text`, which the full-text index includes (schema 3). Empty titles and
descriptions of the bookmark are filled from the page.
A failed fetch never erases what was stored before.

Extractors are plain callables `Page -> Extracted | None`, asked in order before the built-in ones:
the seam through which `content_extractor` plugins take part.
"""

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
import apsw

from marks import clock, extract, pagestore, webclient, worklist
from marks.health import Options
from marks.library import Invalid, Library, NotFound
from marks.wire import PageContent

if TYPE_CHECKING:
    from marks.plugins import Plugins

MAX_BYTES = 5 * 1024 * 1024
Extractor = Callable[[extract.Page], extract.Extracted | None]


@dataclass
class RefreshSummary:
    planned: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, item: PageContent) -> None:
        self.by_outcome[item.outcome] = self.by_outcome.get(item.outcome, 0) + 1


@dataclass
class Fetched:
    status: int | None = None
    final_url: str = ""
    content_type: str = ""
    charset: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    body: bytes = b""
    too_large: bool = False
    not_modified: bool = False
    error: str = ""


def plugin_extractors(plugins: "Plugins | None") -> list[Extractor]:
    """content_extractor plugins as one extractor: the first (by priority) that understands a
    page wins; one that raises is reported and disabled by `Plugins`, never stops the refresh."""
    if plugins is None:
        return []

    def ask(page: extract.Page) -> extract.Extracted | None:
        for name, found in plugins.apply(
            "content_extractor", page.url, page.content_type, page.body
        ):
            text = getattr(found, "text", None)
            if isinstance(text, str):
                return extract.Extracted(
                    text=text,
                    title=str(getattr(found, "title", "") or ""),
                    description=str(getattr(found, "description", "") or ""),
                    extractor=name,
                )
        return None

    return [ask]


def selection(
    library: Library, ids: Sequence[int], where: str, bindings: "Sequence[apsw.SQLiteValue]"
) -> tuple[list[str], list["apsw.SQLiteValue"]]:
    """The SQL conditions (and their values) choosing the bookmarks a fetch run asks for: these
    ids (each must exist: NotFound otherwise) and a query's WHERE. Shared by content and
    snapshots, which plan their runs alike."""
    clauses: list[str] = []
    values: list[apsw.SQLiteValue] = []
    if ids:
        for bookmark_id in ids:
            library.get(bookmark_id)
        clauses.append(f"id IN ({','.join('?' * len(ids))})")
        values += list(ids)
    if where:
        clauses.append(where)
        values += list(bindings)
    return clauses, values


class Content:
    def __init__(
        self,
        library: Library,
        options: Options | None = None,
        extractors: Sequence[Extractor] = (),
    ) -> None:
        self.library = library
        self.store = library.store
        self.options = options or Options()
        self.not_web = 0  # of the last plan: bookmarks chosen that are not http(s) pages
        # The caller's extractors, then the library's content_extractor plugins, then built-ins.
        self.extractors = [*extractors, *plugin_extractors(library.plugins)]

    # --- reading ---------------------------------------------------------------------------------

    def view(self, bookmark_id: int, raw: bool = False) -> str:
        self.library.get(bookmark_id)
        row = self.store.one(
            "SELECT text, blob, kind, error FROM page_content WHERE bookmark_id = ?",
            (bookmark_id,),
        )
        if row is None:
            raise NotFound(f"no content stored for bookmark {bookmark_id} (content refresh)")
        text, blob, kind, error = row
        body = None if blob is None else pagestore.get(self.store, blob)
        if body is None:
            raise NotFound(f"no page stored for bookmark {bookmark_id}: {error or kind}")
        if not raw:
            return text
        if kind == "pdf":
            raise Invalid(f"bookmark {bookmark_id} is a PDF: --raw shows only text pages")
        return extract.decode(body, None)

    def original(self, bookmark_id: int) -> tuple[str, str, bytes] | None:
        """The stored page as fetched: (final URL, content type, body), or None."""
        row = self.store.one(
            "SELECT url, content_type, blob FROM page_content WHERE bookmark_id = ? "
            "AND blob IS NOT NULL",
            (bookmark_id,),
        )
        body = None if row is None else pagestore.get(self.store, row[2])
        return None if row is None or body is None else (row[0], row[1], body)

    def text(self, bookmark_id: int) -> str:
        """The stored page text of a bookmark ("" when none is stored)."""
        return (
            self.store.value("SELECT text FROM page_content WHERE bookmark_id = ?", (bookmark_id,))
            or ""
        )

    def stored(self, bookmark_id: int) -> PageContent | None:
        row = self.store.one(
            "SELECT b.url, c.kind, c.status, c.content_type, c.size, length(c.text), c.title, "
            "c.error, c.fetched_at FROM page_content c JOIN bookmarks b ON b.id = c.bookmark_id "
            "WHERE c.bookmark_id = ?",
            (bookmark_id,),
        )
        if row is None:
            return None
        return PageContent(
            id=bookmark_id,
            url=row[0],
            outcome="stored",
            kind=row[1],
            status=row[2],
            content_type=row[3],
            size=row[4],
            words=row[5] or 0,
            title=row[6],
            detail=row[7],
            fetched_at=clock.from_text(row[8]),
        )

    # --- choosing --------------------------------------------------------------------------------

    def plan(
        self,
        ids: Sequence[int] = (),
        everything: bool = False,
        where: str = "",
        bindings: "Sequence[apsw.SQLiteValue]" = (),
    ) -> int:
        if not (ids or everything or where):
            raise Invalid("say which pages: IDS, --all or --query EXPR")
        clauses, values = selection(self.library, ids, where, bindings)
        web = "(lower(substr(url, 1, 7)) = 'http://' OR lower(substr(url, 1, 8)) = 'https://')"
        condition = " AND ".join(f"({c})" for c in [*clauses, web])
        # Bookmarklets, file:, mailto:, browser pages...: never fetched, counted for the summary.
        chosen = " AND ".join(f"({c})" for c in clauses) or "1"
        self.not_web = self.store.value(
            f"SELECT count(*) FROM bookmarks WHERE ({chosen}) AND NOT {web}", values
        )
        self.store.execute(
            "CREATE TEMP TABLE IF NOT EXISTS content_plan "
            "(seq INTEGER PRIMARY KEY, bookmark_id INTEGER, url TEXT)"
        )
        self.store.execute("DELETE FROM temp.content_plan")
        self.store.execute(
            "INSERT INTO temp.content_plan (bookmark_id, url) SELECT id, url FROM ("
            "SELECT id, url, domain, row_number() OVER (PARTITION BY domain ORDER BY id) AS turn "
            f"FROM bookmarks WHERE {condition}) ORDER BY turn, domain, id",
            values,
        )
        return self.store.value("SELECT count(*) FROM temp.content_plan")

    # --- fetching --------------------------------------------------------------------------------

    def refresh(
        self,
        *,
        force: bool = False,
        on_result: Callable[[PageContent], None] = lambda item: None,
        summary: RefreshSummary | None = None,
    ) -> RefreshSummary:
        """Fetch the planned pages (call `plan` first); each result is stored as it comes."""
        summary = summary or RefreshSummary()
        summary.planned = self.store.value("SELECT count(*) FROM temp.content_plan")
        started = time.monotonic()

        def finished(item: tuple[int, str], fetched: Fetched) -> None:
            result = self.keep(item[0], item[1], fetched)
            summary.add(result)
            on_result(result)

        try:
            asyncio.run(self._fetch_all(force, finished))
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise KeyboardInterrupt from None  # every page finished so far is stored
        finally:
            summary.seconds = time.monotonic() - started
        return summary

    async def _fetch_all(
        self, force: bool, finished: Callable[[tuple[int, str], Fetched], None]
    ) -> None:
        settings = webclient.ClientSettings(
            self.options.concurrency, self.options.per_host, self.options.timeout
        )
        scheduler: webclient.Scheduler[tuple[int, str], Fetched] = webclient.Scheduler(
            settings.concurrency, settings.per_host
        )
        async with webclient.session(settings) as session:

            async def work(item: tuple[int, str]) -> Fetched:
                validators = None if force else self._validators(item[0])
                return await fetch_page(session, item[1], validators)

            await scheduler.run(
                worklist.rows(self.store, "temp.content_plan"),
                lambda item: webclient.host_of(item[1]),
                work,
                finished,
            )

    def _validators(self, bookmark_id: int) -> tuple[str | None, str | None] | None:
        row = self.store.one(
            "SELECT etag, last_modified FROM page_content WHERE bookmark_id = ? "
            "AND blob IS NOT NULL",
            (bookmark_id,),
        )
        return None if row is None else (row[0], row[1])

    # --- keeping ---------------------------------------------------------------------------------

    def extract(self, page: extract.Page) -> extract.Extracted | None:
        for extractor in self.extractors:
            found = extractor(page)
            if found is not None:
                return found
        built_in = extract.BUILT_IN.get(extract.kind_of(page.content_type, page.url))
        return built_in(page) if built_in is not None else None

    def keep(self, bookmark_id: int, url: str, fetched: Fetched) -> PageContent:
        """Store what a fetch found (the one place page bodies and text are kept)."""
        now = clock.to_text(self.library.now())
        result = PageContent(id=bookmark_id, url=url, outcome="failed", status=fetched.status)
        if fetched.not_modified:
            self.store.execute(
                "UPDATE page_content SET fetched_at = ?, error = '' WHERE bookmark_id = ?",
                (now, bookmark_id),
            )
            result.outcome, result.kind = "unchanged", "unchanged"
            return result
        if fetched.error or fetched.too_large:
            result.outcome = "too_large" if fetched.too_large else "failed"
            result.kind = "too_large" if fetched.too_large else "error"
            result.detail = (
                f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not stored"
                if fetched.too_large
                else fetched.error
            )
            self.store.execute(
                "INSERT INTO page_content (bookmark_id, fetched_at, url, status, kind, "
                "content_type, error) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (bookmark_id) DO UPDATE SET fetched_at = excluded.fetched_at, "
                "status = excluded.status, error = excluded.error",
                (
                    bookmark_id,
                    now,
                    fetched.final_url or url,
                    fetched.status,
                    result.kind,
                    fetched.content_type,
                    result.detail,
                ),
            )
            return result
        page = extract.Page(fetched.final_url, fetched.content_type, fetched.charset, fetched.body)
        kind = extract.kind_of(fetched.content_type, fetched.final_url)
        try:
            found = self.extract(page) or extract.Extracted()
        except Exception as error:  # a broken PDF or page: keep the original, say why
            found = extract.Extracted()
            result.detail = f"no text extracted: {type(error).__name__}: {error}"[:300]
        with self.store.transaction():
            self.store.execute(
                "INSERT INTO page_content (bookmark_id, fetched_at, changed_at, url, status, kind, "
                "content_type, etag, last_modified, size, blob, text, title, description, "
                "error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (bookmark_id) DO UPDATE SET fetched_at = excluded.fetched_at, "
                "changed_at = excluded.changed_at, url = excluded.url, status = excluded.status, "
                "kind = excluded.kind, content_type = excluded.content_type, "
                "etag = excluded.etag, last_modified = excluded.last_modified, "
                "size = excluded.size, blob = excluded.blob, text = excluded.text, "
                "title = excluded.title, description = excluded.description, error = ''",
                (
                    bookmark_id,
                    now,
                    now,
                    fetched.final_url,
                    fetched.status,
                    kind,
                    fetched.content_type,
                    fetched.etag,
                    fetched.last_modified,
                    len(fetched.body),
                    pagestore.put(self.store, fetched.body),
                    found.text,
                    found.title,
                    found.description,
                    result.detail,
                ),
            )
            # Fill what the bookmark lacks; never replace what the user wrote.
            self.store.execute(
                "UPDATE bookmarks SET title = CASE title WHEN '' THEN ? ELSE title END, "
                "description = CASE description WHEN '' THEN ? ELSE description END "
                "WHERE id = ? AND (title = '' AND ? != '' OR description = '' AND ? != '')",
                (found.title, found.description, bookmark_id, found.title, found.description),
            )
        result.outcome, result.kind = "stored", kind
        result.content_type, result.size = fetched.content_type, len(fetched.body)
        result.words, result.title = len(found.text.split()), found.title
        return result


async def fetch_page(
    session: aiohttp.ClientSession,
    url: str,
    validators: tuple[str | None, str | None] | None,
    limit: int = MAX_BYTES,
) -> Fetched:
    """GET one page or resource under the shared client rules: at most `limit` bytes."""
    headers = {}
    if validators is not None:
        if validators[0]:
            headers["If-None-Match"] = validators[0]
        if validators[1]:
            headers["If-Modified-Since"] = validators[1]
    fetched = Fetched(final_url=url)
    try:
        async with session.get(url, headers=headers, max_redirects=webclient.MAX_REDIRECTS) as r:
            fetched.status, fetched.final_url = r.status, str(r.url)
            if r.status == 304 and validators is not None:
                fetched.not_modified = True
                return fetched
            if r.status >= 400:
                fetched.error = f"HTTP {r.status}"
                return fetched
            fetched.content_type = r.content_type.lower()
            fetched.charset = r.charset
            fetched.etag = r.headers.get("ETag")
            fetched.last_modified = r.headers.get("Last-Modified")
            if (r.content_length or 0) > limit:
                fetched.too_large = True
                return fetched
            fetched.body, fetched.too_large = await webclient.read_capped(r, limit)
            if fetched.too_large:
                fetched.body = b""
    except (TimeoutError, aiohttp.ServerTimeoutError):
        fetched.error = "timeout"
    except aiohttp.ClientError as error:
        fetched.error = f"{type(error).__name__}: {error}"[:300]
    except (OSError, ValueError) as error:
        fetched.error = str(error)[:300]
    return fetched
