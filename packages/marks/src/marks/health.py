"""The link health checker (service layer): which bookmarks to check, checking them, the history.

Every check is a row in `health_checks` and updates the bookmark's `reachable`, `last_checked` and
`check_result`. A link is *confirmed* broken once it has failed on checks at least
`confirm_hours` apart with no success between (the row's `failing_since` marks the first failure
of the current run). The run streams: the bookmarks to check are planned in a temporary table in
host-interleaved order and read in pages, results are written in small transactions as they come,
so 100,000 links hold neither 100,000 tasks nor 100,000 results, and Ctrl-C keeps what was stored.

Reading the history (`last`, `unconfirmed_ids`: the shell's `ls /broken`, `stat`) needs none of
the checker: the HTTP client (aiohttp, asyncio, ssl: 150 ms of imports) loads in `run` only.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from marks import clock
from marks.library import Library, NotFound
from marks.wire import HealthCheck

if TYPE_CHECKING:
    import apsw

    from marks import linkcheck

FLUSH_EVERY = 200


# msgspec Structs rather than dataclasses: `ls /broken` reads the last checks through this module,
# and `dataclasses` with three generated classes cost it about 13 million instructions.
class Options(msgspec.Struct, frozen=True):
    concurrency: int = 20
    per_host: int = 4
    timeout: float = 10.0
    retries: int = 2
    max_age_hours: float = 24.0
    confirm_hours: float = 4.0
    backoff: float = 0.5


class Selection(msgspec.Struct, frozen=True):
    ids: tuple[int, ...] = ()
    broken: bool = False
    unchecked: bool = False
    where: str = ""  # from filters.compile_filter
    bindings: tuple = ()
    force: bool = False

    @property
    def always_check(self) -> bool:
        return self.force or self.broken or self.unchecked or bool(self.ids)


class Summary(msgspec.Struct):
    planned: int = 0
    checked: int = 0
    too_recent: int = 0  # skipped: checked less than max_age ago
    not_http: int = 0
    by_result: dict[str, int] = msgspec.field(default_factory=dict)
    unconfirmed: list[int] = msgspec.field(default_factory=list)  # failing, not yet confirmed
    # Of those, the ones failing on earlier checks too.
    failed_again: list[int] = msgspec.field(default_factory=list)
    # The latest start of a run of failures among the unconfirmed (first failures; failed again):
    # a check `confirm_hours` after it can confirm them all.
    first_failing_since: dt.datetime | None = None
    again_failing_since: dt.datetime | None = None
    confirmed: list[int] = msgspec.field(default_factory=list)
    hosts_down: dict[str, int] = msgspec.field(default_factory=dict)  # host -> links not tried
    seconds: float = 0.0
    interrupted: bool = False

    def add(self, check: HealthCheck, again: bool = False) -> None:
        """Count a result; `again`: a failure after an earlier failure of the same run."""
        self.checked += 1
        self.by_result[check.result] = self.by_result.get(check.result, 0) + 1
        if check.reachable:
            return
        if check.confirmed:
            self.confirmed.append(check.id)
            return
        self.unconfirmed.append(check.id)
        since = check.failing_since or check.checked_at
        if again:
            self.failed_again.append(check.id)
            if since is not None:
                self.again_failing_since = max(since, self.again_failing_since or since)
        elif since is not None:
            self.first_failing_since = max(since, self.first_failing_since or since)


def options_from_config(config: dict[str, Any], **overrides: float | None) -> Options:
    values = {
        "concurrency": config.get("health_concurrency", 20),
        "per_host": config.get("health_per_host", 4),
        "timeout": float(config.get("health_timeout", 10)),
        "retries": config.get("health_retries", 2),
        "max_age_hours": float(config.get("health_max_age_hours", 24)),
        "confirm_hours": float(config.get("health_confirm_hours", 4)),
    }
    values.update({name: value for name, value in overrides.items() if value is not None})
    return Options(**values)


def _result_text(check: HealthCheck) -> str:
    text = check.result if check.status is None else f"{check.result} {check.status}"
    if check.final_url:
        text += f" -> {check.final_url}"
    return text


class Health:
    def __init__(self, library: Library, options: Options | None = None) -> None:
        self.library = library
        self.store = library.store
        self.options = options or Options()

    # --- reading the history ---------------------------------------------------------------------

    def last(self, bookmark_id: int) -> HealthCheck | None:
        row = self.store.one(
            "SELECT bookmark_id, url, result, status, reachable, final_url, detail, elapsed_ms, "
            "checked_at, failing_since FROM health_checks WHERE bookmark_id = ? "
            "ORDER BY id DESC LIMIT 1",
            (bookmark_id,),
        )
        return None if row is None else self._from_row(row)

    def history(self, bookmark_id: int, limit: int = 20) -> list[HealthCheck]:
        self.library.get(bookmark_id)
        rows = self.store.execute(
            "SELECT bookmark_id, url, result, status, reachable, final_url, detail, elapsed_ms, "
            "checked_at, failing_since FROM health_checks WHERE bookmark_id = ? "
            "ORDER BY id DESC LIMIT ?",
            (bookmark_id, limit),
        )
        return [self._from_row(row) for row in rows]

    def _from_row(self, row: tuple[Any, ...]) -> HealthCheck:
        checked, since = clock.from_text(row[8]), clock.from_text(row[9])
        return HealthCheck(
            id=row[0],
            url=row[1],
            result=row[2],
            status=row[3],
            reachable=bool(row[4]),
            final_url=row[5],
            detail=row[6],
            elapsed_ms=row[7] or 0,
            checked_at=checked,
            failing_since=since,
            confirmed=self._confirmed(bool(row[4]), checked, since),
        )

    def _confirmed(
        self, reachable: bool, checked: dt.datetime | None, since: dt.datetime | None
    ) -> bool:
        if reachable or checked is None or since is None:
            return False
        return checked - since >= dt.timedelta(hours=self.options.confirm_hours)

    def unconfirmed_ids(self, ids: list[int]) -> set[int]:
        """Of these bookmarks, those whose latest failure is not confirmed yet: one statement
        for the page `ls /broken` shows (the ids as a JSON array: `ls -a` may pass more than
        SQLite's limit of bound variables)."""
        if not ids:
            return set()
        rows = self.store.execute(
            "SELECT bookmark_id, reachable, checked_at, failing_since FROM health_checks "
            "WHERE id IN (SELECT max(id) FROM health_checks WHERE bookmark_id IN "
            "(SELECT value FROM json_each(?)) GROUP BY bookmark_id)",
            (f"[{','.join(str(int(i)) for i in ids)}]",),
        )
        return {
            row[0]
            for row in rows
            if not row[1]
            and not self._confirmed(False, clock.from_text(row[2]), clock.from_text(row[3]))
        }

    def confirmed_broken(self) -> int:
        """How many bookmarks unreachable now are confirmed broken (by their latest check)."""
        rows = self.store.execute(
            "SELECT h.reachable, h.checked_at, h.failing_since FROM bookmarks b "
            "JOIN health_checks h ON h.id = "
            "(SELECT max(id) FROM health_checks WHERE bookmark_id = b.id) WHERE b.reachable = 0"
        )
        return sum(
            self._confirmed(bool(row[0]), clock.from_text(row[1]), clock.from_text(row[2]))
            for row in rows
        )

    # --- choosing what to check ------------------------------------------------------------------

    def plan(self, selection: Selection, summary: Summary) -> int:
        """Fill the temporary plan table; returns how many links will be checked."""
        clauses: list[str] = []
        bindings: list[apsw.SQLiteValue] = []
        if selection.ids:
            for bookmark_id in selection.ids:
                if self.store.value("SELECT 1 FROM bookmarks WHERE id = ?", (bookmark_id,)) is None:
                    raise NotFound(f"no bookmark with id {bookmark_id}")
            clauses.append(f"id IN ({','.join('?' * len(selection.ids))})")
            bindings += list(selection.ids)
        kinds = []
        if selection.broken:
            kinds.append("reachable = 0")
        if selection.unchecked:
            kinds.append("reachable IS NULL")
        if kinds:
            clauses.append(" OR ".join(kinds))
        if selection.where:
            clauses.append(selection.where)
            bindings += list(selection.bindings)
        where = " AND ".join(f"({c})" for c in clauses) or "1"
        web = "(lower(substr(url, 1, 7)) = 'http://' OR lower(substr(url, 1, 8)) = 'https://')"
        summary.not_http = self.store.value(
            f"SELECT count(*) FROM bookmarks WHERE ({where}) AND NOT {web}", bindings
        )
        fresh = "1"
        if not selection.always_check:
            cutoff = clock.to_text(
                self.library.now() - dt.timedelta(hours=self.options.max_age_hours)
            )
            summary.too_recent = self.store.value(
                f"SELECT count(*) FROM bookmarks WHERE ({where}) AND {web} AND last_checked >= ?",
                [*bindings, cutoff],
            )
            fresh = "(last_checked IS NULL OR last_checked < ?)"
            bindings = [*bindings, cutoff]
        self.store.execute(
            "CREATE TEMP TABLE IF NOT EXISTS health_plan "
            "(seq INTEGER PRIMARY KEY, bookmark_id INTEGER, url TEXT)"
        )
        self.store.execute("DELETE FROM temp.health_plan")
        # Interleave hosts (first link of every host, then the second...) so the per-host limit
        # rarely holds the queue up.
        self.store.execute(
            "INSERT INTO temp.health_plan (bookmark_id, url) SELECT id, url FROM ("
            "SELECT id, url, domain, row_number() OVER (PARTITION BY domain ORDER BY id) AS turn "
            f"FROM bookmarks WHERE ({where}) AND {web} AND {fresh}) ORDER BY turn, domain, id",
            bindings,
        )
        summary.planned = self.store.value("SELECT count(*) FROM temp.health_plan")
        return summary.planned

    # --- checking --------------------------------------------------------------------------------

    def run(
        self,
        selection: Selection,
        *,
        dry_run: bool = False,
        on_result: Callable[[HealthCheck], None] = lambda check: None,
        summary: Summary | None = None,
    ) -> Summary:
        """Check the selected links; results are stored as they come (unless dry_run)."""
        import asyncio

        from marks import linkcheck

        summary = summary if summary is not None else Summary()
        if not summary.planned:
            self.plan(selection, summary)
        pending: list[HealthCheck] = []
        started = time.monotonic()
        gate = linkcheck.HostGate()

        def finished(item: tuple[int, str], verdict: linkcheck.Verdict) -> None:
            check, again = self._judge(item[0], item[1], verdict)
            summary.add(check, again)
            if not dry_run:
                pending.append(check)
                if len(pending) >= FLUSH_EVERY:
                    self._store(pending)
            on_result(check)

        try:
            asyncio.run(self._check_all(gate, finished))
        except (KeyboardInterrupt, asyncio.CancelledError):
            summary.interrupted = True
            raise KeyboardInterrupt from None
        finally:
            if not dry_run:
                self._store(pending)
            summary.hosts_down = dict(gate.skipped)
            summary.seconds = time.monotonic() - started
        return summary

    async def _check_all(
        self,
        gate: linkcheck.HostGate,
        finished: Callable[[tuple[int, str], linkcheck.Verdict], None],
    ) -> None:
        from marks import linkcheck, webclient, worklist

        settings = webclient.ClientSettings(
            self.options.concurrency, self.options.per_host, self.options.timeout
        )
        scheduler: webclient.Scheduler[tuple[int, str], linkcheck.Verdict] = webclient.Scheduler(
            settings.concurrency, settings.per_host
        )
        async with webclient.session(settings) as session:

            async def work(item: tuple[int, str]) -> linkcheck.Verdict:
                return await linkcheck.check(
                    session,
                    item[1],
                    timeout=self.options.timeout,
                    retries=self.options.retries,
                    gate=gate,
                    backoff=self.options.backoff,
                )

            await scheduler.run(
                worklist.rows(self.store, "temp.health_plan"),
                lambda item: webclient.host_of(item[1]),
                work,
                finished,
            )

    def _judge(
        self, bookmark_id: int, url: str, verdict: linkcheck.Verdict
    ) -> tuple[HealthCheck, bool]:
        """The check's result, and whether it is a failure after an earlier one (of this run)."""
        now = self.library.now()
        since = None
        again = False
        if not verdict.reachable:
            previous = self.store.one(
                "SELECT reachable, failing_since FROM health_checks WHERE bookmark_id = ? "
                "ORDER BY id DESC LIMIT 1",
                (bookmark_id,),
            )
            again = previous is not None and not previous[0]
            earlier = previous[1] if previous is not None and again else None
            since = clock.from_text(earlier) if earlier else now
        check = HealthCheck(
            id=bookmark_id,
            url=url,
            result=verdict.result,
            status=verdict.status,
            reachable=verdict.reachable,
            final_url=verdict.final_url,
            detail=verdict.detail,
            elapsed_ms=verdict.elapsed_ms,
            attempts=verdict.attempts,
            checked_at=now,
            failing_since=since,
            confirmed=self._confirmed(verdict.reachable, now, since),
        )
        return check, again

    def _store(self, pending: list[HealthCheck]) -> None:
        if not pending:
            return
        with self.store.transaction():
            self.store.db.executemany(
                "INSERT INTO health_checks (bookmark_id, checked_at, url, result, status, "
                "reachable, final_url, detail, elapsed_ms, failing_since) "
                "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS "
                "(SELECT 1 FROM bookmarks WHERE id = ?1)",
                [
                    (
                        c.id,
                        clock.to_text(c.checked_at),
                        c.url,
                        c.result,
                        c.status,
                        int(c.reachable),
                        c.final_url,
                        c.detail,
                        c.elapsed_ms,
                        clock.to_text(c.failing_since),
                    )
                    for c in pending
                ],
            )
            self.store.db.executemany(
                "UPDATE bookmarks SET reachable = ?, last_checked = ?, check_result = ? "
                "WHERE id = ?",
                [
                    (int(c.reachable), clock.to_text(c.checked_at), _result_text(c), c.id)
                    for c in pending
                ],
            )
        pending.clear()
