"""`/export/{format}` streams every bookmark; `POST /import/{format}` takes a file as the body.

An export runs on its own connection in a worker thread (one consistent snapshot however long
the download takes) and hands chunks through a small bounded queue, so the server holds a few
chunks at a time, never the whole library. An import spools the body to a temporary file and
runs the same `transfer.import_file` as the CLI: one transaction, the same report, whose lines
(one per entry not simply added) are spooled to a temporary file and streamed into the answer.
"""

import contextlib
import os
import queue
import tempfile
import threading
from collections.abc import Iterator
from typing import TextIO, cast

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from marks import transfer
from marks.formats import FormatError
from marks.importing import ProblemLog, report_json
from marks.library import Library
from marks.server.endpoint import Endpoint, Libraries, Param, in_thread
from marks.server.settings import ServerSettings
from marks.store import Store
from marks.wire import Bookmark, ImportReport
from servekit import HTTPError

MEDIA = {
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "markdown": "text/markdown; charset=utf-8",
}
SUFFIX = {"json": "json", "html": "html", "csv": "csv", "markdown": "md"}
CHUNK = 64 * 1024
_DONE = object()


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


def _stream(settings: ServerSettings, fmt: str, hierarchical: bool) -> Iterator[bytes]:
    pipe = _Pipe()
    failure: list[BaseException] = []

    def produce() -> None:
        store = None
        try:
            store = Store(settings.db)
            store.db.setbusytimeout(settings.busy_timeout_ms)
            options = {"hierarchical": hierarchical} if fmt == "html" else {}
            store.execute("BEGIN")  # a read transaction: one snapshot for the whole file
            try:
                # The exporters only write() text: the pipe is all the file they need.
                transfer.export(Library(store), fmt, cast(TextIO, pipe), **options)
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

    worker = threading.Thread(target=produce, name="marks-export", daemon=True)
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


async def export(request: Request, libraries: Libraries, settings: ServerSettings) -> Response:
    fmt = request.path_params["format"]
    if fmt not in transfer.EXPORT_FORMATS:
        raise HTTPError(404, "Not found", f"no export format {fmt!r}")
    hierarchical = request.query_params.get("hierarchical", "0").lower() in ("1", "true", "yes")
    filename = f"marks.{SUFFIX.get(fmt, fmt)}"
    return StreamingResponse(
        _stream(settings, fmt, hierarchical),
        media_type=MEDIA.get(fmt, "application/octet-stream"),
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


async def import_(request: Request, libraries: Libraries, settings: ServerSettings) -> Response:
    fmt = request.path_params["format"]
    if fmt not in transfer.IMPORT_FORMATS:
        raise HTTPError(404, "Not found", f"no import format {fmt!r}")
    update = request.query_params.get("update", "0").lower() in ("1", "true", "yes")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > settings.upload_limit:
        raise HTTPError(
            413, "Payload too large", f"uploads are limited to {settings.upload_limit} bytes"
        )
    fd, path = tempfile.mkstemp(prefix="marks-upload-", suffix=f".{fmt}")
    try:
        size = 0
        with os.fdopen(fd, "wb") as spool:
            async for chunk in request.stream():
                size += len(chunk)
                if size > settings.upload_limit:
                    raise HTTPError(
                        413,
                        "Payload too large",
                        f"uploads are limited to {settings.upload_limit} bytes",
                    )
                spool.write(chunk)

        def run(library: Library) -> ImportReport:
            try:
                return transfer.import_file(library, fmt, path, update=update, problems=log)
            except FormatError as error:  # say "the upload", not our temporary file's name
                raise FormatError(str(error).replace(path, "the upload")) from None

        log = ProblemLog()  # the answer's `problems`, spooled: one per entry not simply added
        try:
            report = await in_thread(libraries, run)
        except BaseException:
            log.close()
            raise
    finally:
        os.unlink(path)
    return StreamingResponse(_answer(report, log), media_type="application/json")


def _answer(report: ImportReport, log: ProblemLog) -> Iterator[bytes]:
    """The report as JSON, its problems read back from the spool, which is closed at the end
    (or when the client leaves)."""
    try:
        yield from report_json(report, log)
    finally:
        log.close()


ENDPOINTS = [
    Endpoint("GET", "/export/{format}", "Every bookmark as json, html, csv or markdown (streamed)",
             export, (Param("hierarchical", bool, False, "html: folders from tags"),),
             response={"application/json": list[Bookmark], "text/html": str, "text/csv": str,
                       "text/markdown": str}, raw=True, errors=(404,)),
    Endpoint("POST", "/import/{format}", "Import a file sent as the body (html, json, csv, text);"
             " all or nothing, answers the same report as the CLI", import_,
             (Param("update", bool, False, "merge into bookmarks that exist"),),
             body=bytes, response=ImportReport, raw=True, errors=(404, 413, 422)),
]  # fmt: skip
