"""`/export/{format}` streams every bookmark; `POST /import/{format}` takes a file as the body.

An export is streamed from one snapshot on its own connection (`streaming.stream`), so the
server holds a few chunks at a time, never the whole library. An import spools the body to a
temporary file and runs the same `transfer.import_file` as the CLI: one transaction, the same
report, whose lines (one per entry not simply added) are spooled to a temporary file and streamed
into the answer.
"""

import os
import tempfile
from collections.abc import Iterator
from typing import TextIO

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from marks import transfer
from marks.formats import FormatError
from marks.importing import ProblemLog, report_json
from marks.library import Library
from marks.server import streaming
from marks.server.endpoint import Endpoint, Libraries, Param, in_thread
from marks.server.settings import ServerSettings
from marks.wire import Bookmark, ImportReport
from servekit import HTTPError

MEDIA = {
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
    "markdown": "text/markdown; charset=utf-8",
}
SUFFIX = {"json": "json", "html": "html", "csv": "csv", "markdown": "md"}


async def export(request: Request, libraries: Libraries, settings: ServerSettings) -> Response:
    fmt = request.path_params["format"]
    if fmt not in transfer.EXPORT_FORMATS:
        raise HTTPError(404, "Not found", f"no export format {fmt!r}")
    hierarchical = request.query_params.get("hierarchical", "0").lower() in ("1", "true", "yes")
    options = {"hierarchical": hierarchical} if fmt == "html" else {}

    def write(library: Library, out: TextIO) -> None:
        transfer.export(library, fmt, out, **options)

    filename = f"marks.{SUFFIX.get(fmt, fmt)}"
    return StreamingResponse(
        streaming.stream(settings, write),
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
                       "text/markdown": str}, raw=True, errors=(404,),
             choices={"format": transfer.EXPORT_FORMATS}),
    Endpoint("POST", "/import/{format}", "Import a file sent as the body (html, json, csv, text);"
             " invalid entries are skipped and counted, a file that is not its format changes"
             " nothing; answers the same report as the CLI", import_,
             (Param("update", bool, False, "merge into bookmarks that exist"),),
             body=bytes, response=ImportReport, raw=True, errors=(404, 413, 422),
             choices={"format": transfer.IMPORT_FORMATS}),
]  # fmt: skip
