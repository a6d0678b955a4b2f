"""Graph builds run in the background for the REST API, each read back by its id.

`graph build` takes about ten seconds at 100,000 bookmarks, so `POST /graph/build` answers 202
with an id at once and the build runs in a thread of its own through `marks.graph.build` -- what
the CLI runs -- on its own database connection (not one of the request threads). A build is one
write transaction, and SQLite has one writer: a second build at the same time could only wait for
the first and then redo the same work, so it is refused with 429 and `Retry-After`
(`background.Runs`). The graph itself is in the database (`GET /graph/stats` says when it was
built).
"""

import datetime as dt
import threading
from collections.abc import Callable
from typing import Literal

import msgspec

from marks import clock
from marks.graph import BuildReport
from marks.graph.build import STEPS, build
from marks.library import Library
from marks.server.background import Runs


class BuildProgress(msgspec.Struct, kw_only=True):
    """A graph build as `GET /graph/build/{build_id}` shows it."""

    id: str
    state: Literal["running", "done", "failed"]
    started_at: dt.datetime
    finished_at: dt.datetime | None = None
    step: str | None = None  # the step running now: tags, sites, candidates, scores, edges
    steps_done: int = 0
    steps: int = len(STEPS)
    report: BuildReport | None = None  # nodes, edges, seconds: once done
    error: str | None = None  # once failed (the graph stays as it was)


class GraphBuilds:
    """The server's graph builds: at most one running, the last few finished (`Runs`)."""

    def __init__(self, open_library: Callable[[], Library]) -> None:
        self._open_library = open_library  # a new connection, for the build's own thread
        self._builds: Runs[BuildProgress] = Runs("graph build")
        self._lock = self._builds.lock

    @property
    def running(self) -> str | None:
        return self._builds.running

    def start(self) -> BuildProgress:
        build_id = self._builds.begin()
        progress = BuildProgress(id=build_id, state="running", started_at=clock.now())
        with self._lock:
            self._builds.add(build_id, progress)
            answer = msgspec.structs.replace(progress)
        threading.Thread(
            target=self._work, args=(progress,), name=f"graph-{build_id}", daemon=True
        ).start()
        return answer

    def get(self, build_id: str) -> BuildProgress | None:
        with self._lock:
            found = self._builds.get(build_id)
            # A copy: the build's thread goes on changing the original while it is encoded.
            return None if found is None else msgspec.structs.replace(found)

    def _work(self, progress: BuildProgress) -> None:
        def on_step(step: str) -> None:
            with self._lock:
                progress.step, progress.steps_done = step, STEPS.index(step)

        report: BuildReport | None = None
        problem = None
        try:
            library = self._open_library()
            try:
                report = build(library.store, library.now, progress=on_step)
            finally:
                library.store.close()
        except BaseException as failure:  # kept readable as the build's error, never lost
            problem = f"{type(failure).__name__}: {failure}".splitlines()[0]
        with self._lock:
            progress.report, progress.error = report, problem
            progress.state = "failed" if problem else "done"
            progress.step = None
            if report is not None:
                progress.steps_done = len(STEPS)
            progress.finished_at = clock.now()
            self._builds.end(progress.id)
