"""Open files: the process's limit, a reserve of them kept for new clients, and an accept loop
that says once, not once a second with a traceback, that it ran out.

Every connection and every file a response reads is a descriptor. A server at its limit can
accept no one: its health checks and small requests fail with the long-lived streams that took
the table. So the launcher raises the soft limit to the hard one at start, and a server refuses
new long-lived work (streams, uploads) while fewer than `reserve(limit)` descriptors are left,
keeping those for everybody else's short requests.
"""

import asyncio
import contextlib
import errno
import logging
import os
import resource
import time
from typing import Any

log = logging.getLogger("servekit")
_FD_DIRS = ("/proc/self/fd", "/dev/fd")
_ACCEPT_FAILED = "socket.accept() out of system resource"
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


def raise_limit() -> tuple[int, int]:
    """Raise this process's soft limit of open files to its hard limit; (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # macOS: an "unlimited" hard limit is not settable
            return soft, soft
    return soft, hard


def limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def reserve(of: int) -> int:
    """Descriptors kept for new clients' short requests: a quarter of the limit, at most 256
    (the accept loop, health checks, status requests and a job's own files need no more)."""
    return min(256, of // 4)


def open_count() -> int | None:
    """How many descriptors this process holds: None when the table is full (listing them takes
    one more), 0 where the system does not list them."""
    # Linux 6.2 and later give the count as the size of /proc/self/fd: a stat, no descriptor
    # and no name per open file (4.6 us against 400 us for a listing at 250 open files; a
    # server under a download flood asks before every stream). Older kernels say 0 there.
    with contextlib.suppress(OSError):
        if count := os.stat(_FD_DIRS[0]).st_size:
            return count
    for folder in _FD_DIRS:
        try:
            return len(os.listdir(folder)) - 1  # listing the folder opened one
        except OSError as error:
            if error.errno in _OUT_OF_FILES:
                return None
    return 0


def running_low() -> bool:
    """Whether this process has fewer than `reserve` descriptors left: refuse long-lived work."""
    total = limit()
    count = open_count()
    return count is None or count >= total - reserve(total)


class QuietAccept:
    """A loop exception handler that reports an accept loop out of descriptors in one short line
    per `interval` seconds (asyncio pauses the loop a second and retries, each time with a
    traceback), and passes everything else on to the handler it replaces."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = 60.0) -> None:
        self.previous = loop.get_exception_handler()
        self.interval = interval
        self.last = -interval
        self.missed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if context.get("message") == _ACCEPT_FAILED and isinstance(error, OSError):
            now = time.monotonic()
            if now - self.last < self.interval:
                self.missed += 1
                return
            log.warning(
                "new connections wait: accept() failed (%s; the limit is %d open files)%s",
                os.strerror(error.errno) if error.errno in _OUT_OF_FILES else error,
                limit(),
                f"; {self.missed} more times since the last report" if self.missed else "",
            )
            self.last, self.missed = now, 0
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)
