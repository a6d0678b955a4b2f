"""Batch link checks run in the background for the REST API, each read back by its id.

A batch can take minutes, so `POST /bookmarks/health` answers 202 with an id at once and the
check runs in its own thread through `marks.health` -- the service the CLI uses -- with its own
database connection (the plan is a temporary table of that connection). One batch runs at a time
(`background.Runs`: a second one would compete with the first for the same hosts' per-host limits
and the same writes); the results themselves are in the database (`GET /bookmarks/{id}/health`).
"""

import datetime as dt
import threading
from collections.abc import Callable
from typing import Literal

import msgspec

from marks import clock, health, wayback
from marks.library import Library
from marks.server.background import Runs
from marks.store import Store
from marks.wire import HealthCheck

MAX_RESULTS = 10_000  # per check; the counts always cover every link


class CheckProgress(msgspec.Struct, kw_only=True):
    """A batch check as `GET /bookmarks/health/{check_id}` shows it."""

    id: str
    state: Literal["running", "done", "failed"]
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    total: int = 0  # links to check
    done: int = 0
    by_result: dict[str, int] = {}  # ok, redirect, client_error, ... -> links
    broken: int = 0  # unreachable now
    confirmed: int = 0  # of those, confirmed broken (failed on checks hours apart)
    not_http: int = 0  # selected but not http(s): not checked
    too_recent: int = 0  # selected but checked less than health_max_age_hours ago
    hosts_down: dict[str, int] = {}  # host -> links not tried after it stopped answering
    error: str | None = None
    results: list[HealthCheck] = []  # in the order they finished, at most MAX_RESULTS
    results_omitted: int = 0
    archived: int = 0  # confirmed-broken links given an archived copy (config health_wayback)


class _Run:
    def __init__(self, check_id: str, now: dt.datetime) -> None:
        self.progress = CheckProgress(id=check_id, state="running", started_at=now)
        self.summary = health.Summary()
        self.planned = threading.Event()
        self.plan_error: Exception | None = None


class HealthChecks:
    """The server's batch checks: at most one running, the last few finished (`Runs`)."""

    def __init__(
        self,
        open_library: Callable[[], Library],
        options: health.Options,
        wayback_api: str | None = None,
    ) -> None:
        self._open_library = open_library  # a new connection, for the check's own thread
        self.options = options
        self.wayback_api = wayback_api  # set: archived copies of confirmed-broken links
        self._runs: Runs[_Run] = Runs("check")
        self._lock = self._runs.lock

    @property
    def running(self) -> str | None:
        return self._runs.running

    def start(self, selection: health.Selection) -> CheckProgress:
        """Plan the batch in its thread, wait for the plan (its errors are the caller's), then
        let it run; returns the progress as planned."""
        check_id = self._runs.begin()
        run = _Run(check_id, clock.now())
        thread = threading.Thread(
            target=self._work, args=(run, selection), name=f"health-{check_id}", daemon=True
        )
        thread.start()
        run.planned.wait()
        if run.plan_error is not None:
            thread.join()
            raise run.plan_error
        with self._lock:
            return _copy(run.progress)

    def get(self, check_id: str) -> CheckProgress | None:
        with self._lock:
            run = self._runs.get(check_id)
            return None if run is None else _copy(run.progress)

    def _work(self, run: _Run, selection: health.Selection) -> None:
        store: Store | None = None
        try:
            library = self._open_library()
            store = library.store
            checker = health.Health(library, self.options)
            checker.plan(selection, run.summary)
        except Exception as error:  # refused before it began: the request answers with it
            run.plan_error = error
            self._runs.end(run.progress.id)
            if store is not None:
                store.close()
            run.planned.set()
            return
        progress = run.progress
        progress.total = run.summary.planned
        progress.not_http = run.summary.not_http
        progress.too_recent = run.summary.too_recent
        self._runs.add(progress.id, run)
        run.planned.set()

        def on_result(check: HealthCheck) -> None:
            with self._lock:
                progress.done += 1
                progress.by_result[check.result] = progress.by_result.get(check.result, 0) + 1
                if not check.reachable:
                    progress.broken += 1
                    progress.confirmed += check.confirmed
                if len(progress.results) < MAX_RESULTS:
                    progress.results.append(check)
                else:
                    progress.results_omitted += 1

        state: Literal["done", "failed"] = "done"
        problem = None
        try:
            checker.run(selection, on_result=on_result, summary=run.summary)
            if self.wayback_api and run.summary.confirmed:
                found = wayback.look_up(
                    library, run.summary.confirmed, self.wayback_api, self.options.timeout
                )
                with self._lock:
                    progress.archived = sum(item.url is not None for item in found)
        except BaseException as failure:  # kept readable as the check's error, never lost
            state = "failed"
            problem = f"{type(failure).__name__}: {failure}".splitlines()[0]
        finally:
            store.close()
            with self._lock:
                progress.hosts_down = dict(run.summary.hosts_down)
                progress.state, progress.error = state, problem
                progress.finished_at = clock.now()
                self._runs.end(progress.id)


def _copy(progress: CheckProgress) -> CheckProgress:
    """A snapshot a request can encode while the check's thread goes on adding to the original."""
    return msgspec.structs.replace(
        progress,
        by_result=dict(progress.by_result),
        hosts_down=dict(progress.hosts_down),
        results=list(progress.results),
    )
