"""Streaming a file that a service writes (`write(library, out)`) as a response body.

The writer runs on its own connection in a worker thread, inside one read transaction (one
consistent snapshot however long the download takes), and hands chunks through a small bounded
queue, so the server holds a few chunks at a time, never the whole file. Library exports and graph
exports share it.
"""

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TextIO, cast

from marks.library import Library
from marks.server.settings import ServerSettings
from marks.store import Store

CHUNK = 64 * 1024
_DONE = object()

Writer = Callable[[Library, TextIO], object]


class _Pipe:
    """A text file whose writes become byte chunks in a bounded queue (the writer waits while
    the client is slow; it stops when the client has gone)."""

    def __init__(self) -> None:
        self.chunks: queue.Queue = queue.Queue(maxsize=8)
        self.buffer: list[str] = []
        self.size = 0
        self.closed = threading.Event()

    def write(self, text: str) -> int:
        self.buffer.append(text)
        self.size += len(text)
        if self.size >= CHUNK:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.buffer:
            self.put("".join(self.buffer).encode())
            self.buffer, self.size = [], 0

    def put(self, item: object) -> None:
        while not self.closed.is_set():
            try:
                self.chunks.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
        raise ConnectionAbortedError("the client went away")


def stream(settings: ServerSettings, write: Writer, name: str = "marks-export") -> Iterator[bytes]:
    """The bytes `write` produces, chunk by chunk, as they are written."""
    pipe = _Pipe()
    failure: list[BaseException] = []

    def produce() -> None:
        store = None
        try:
            store = Store(settings.db)
            store.db.setbusytimeout(settings.busy_timeout_ms)
            store.execute("BEGIN")  # a read transaction: one snapshot for the whole file
            try:
                # The writers only write() text: the pipe is all the file they need.
                write(Library(store), cast(TextIO, pipe))
                pipe.flush()
            finally:
                store.execute("COMMIT")
        except ConnectionAbortedError:
            pass
        except BaseException as error:
            failure.append(error)
        finally:
            if store is not None:
                store.close()
            with contextlib.suppress(ConnectionAbortedError):
                pipe.put(_DONE)

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while True:
            item = pipe.chunks.get()
            if item is _DONE:
                break
            yield item
    finally:
        pipe.closed.set()  # a client that left stops the writer at its next chunk
    if failure:  # headers are sent: the truncated body and the log are all we can give
        raise failure[0]
