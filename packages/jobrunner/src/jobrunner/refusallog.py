"""The log of refused requests, at most one line per client and reason per window.

A client that keeps being refused (a download loop answered 429, an upload loop answered 400)
would otherwise write a line per request: in `make bench-hostile`, thousands a minute, and the
log's formatting and writing were a tenth of the server's busy time under attack. The metrics
still count every refusal; the log says that it happened, to whom, and how often: the first
refusal of a window is logged at once, the rest of that window as one line with `repeated`, the
number of refusals it stands for, when the window is over and the server next refuses anyone.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("jobrunner")
WINDOW_SECONDS = 10.0


@dataclass
class _Window:
    opened: float
    status: int
    more: int = 0  # refusals since the line that opened the window, not yet logged


class RefusalLog:
    """Call with each refusal; logs as the module says. Holds one entry per client and reason
    refused in the last two windows at most (each sweep drops the closed ones)."""

    def __init__(
        self, window: float = WINDOW_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window = window
        self.clock = clock
        self._open: dict[tuple[str, str], _Window] = {}
        self._swept = clock()

    def __call__(self, client: str, reason: str, status: int) -> None:
        now = self.clock()
        if now - self._swept >= self.window:
            self._sweep(now)
        key = (client, reason)
        window = self._open.get(key)
        if window is not None and now - window.opened < self.window:
            window.more += 1
            return
        if window is not None and window.more:
            _line(client, reason, window.status, window.more)
        self._open[key] = _Window(now, status)
        _line(client, reason, status, None)

    def _sweep(self, now: float) -> None:
        self._swept = now
        for key, window in list(self._open.items()):
            if now - window.opened >= self.window:
                del self._open[key]
                if window.more:
                    _line(*key, window.status, window.more)


def _line(client: str, reason: str, status: int, repeated: int | None) -> None:
    text = "request refused: %s (%d)" if repeated is None else "request refused: %s (%d) x%d"
    log.info(
        text,
        reason,
        status,
        *(() if repeated is None else (repeated,)),
        extra={
            "event": "request.refused",
            "client": client,
            "reason": reason,
            "http_status": status,
            "repeated": repeated,
        },
    )
