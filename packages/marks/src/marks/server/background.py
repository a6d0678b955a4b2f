"""Work the REST API runs in the background (link-check batches, graph builds): one run of a kind
at a time, each read back by its id.

A second run of the same kind could only compete with the first for the same writes (and, for
link checks, the same hosts), so it is refused with `Busy` (429 and `Retry-After`) until the first
is done. The last `KEEP` finished runs stay readable; older ones are forgotten (404), as is
everything at restart: what a run produced is in the database.
"""

import secrets
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from marks.exceptions import MarksError

KEEP = 20  # finished runs of a kind kept readable
T = TypeVar("T")


class Busy(MarksError):
    """Another run of the same kind is going on (429)."""

    def __init__(self, running: str, what: str = "check") -> None:
        super().__init__(f"{what} {running} is still running: one at a time")
        self.running = running


class Runs(Generic[T]):
    """The runs of one kind, keyed by id. `lock` also guards what a run's thread changes in its
    item while requests read it (it is re-entrant, so holders may call these methods)."""

    def __init__(self, what: str, keep: int = KEEP) -> None:
        self.what = what
        self.keep = keep
        self.lock = threading.RLock()
        self._items: OrderedDict[str, T] = OrderedDict()
        self._running: str | None = None

    @property
    def running(self) -> str | None:
        return self._running

    def begin(self) -> str:
        """A new run's id; `Busy` while another run of this kind goes on."""
        with self.lock:
            if self._running is not None:
                raise Busy(self._running, self.what)
            self._running = secrets.token_hex(8)
            return self._running

    def add(self, run_id: str, item: T) -> None:
        """The run is readable by its id from now on."""
        with self.lock:
            self._items[run_id] = item

    def end(self, run_id: str) -> None:
        """The run is over (done, failed, or refused before it was added): the next may begin,
        and of the finished ones only the last `keep` stay."""
        with self.lock:
            if self._running == run_id:
                self._running = None
            finished = [key for key in self._items if key != self._running]
            for key in finished[: max(0, len(finished) - self.keep)]:
                del self._items[key]

    def get(self, run_id: str) -> T | None:
        """The run's item (copy it under `lock` before handing it to a request)."""
        with self.lock:
            return self._items.get(run_id)
