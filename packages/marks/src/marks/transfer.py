"""Import and export: choosing the format, opening the file, and one transaction per import.

A reader fails with FormatError (one line) when the file is not its format; since the import is
one transaction, such a failure -- or a crash, or Ctrl-C -- leaves the library as it was.
"""

import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TextIO

from marks.formats import FormatError, csvfile, jsonfile, markdown, netscape, text
from marks.library import Library
from marks.wire import ImportReport

IMPORT_FORMATS = ("html", "json", "csv", "text")
EXPORT_FORMATS = ("html", "json", "csv", "markdown")


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as error:
        raise FormatError(f"cannot read {path}: {error.strerror}") from None


def import_file(
    library: Library,
    fmt: str,
    path: str,
    *,
    update: bool = False,
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> ImportReport:
    """Import a file; `progress(bytes_read, total_bytes)` is called as records arrive."""
    raw = _open(path)
    total = Path(path).stat().st_size if path != "-" else 0
    try:
        if fmt == "json":
            records = jsonfile.read(raw)
        else:
            stream = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            reader = {"html": netscape.read, "csv": csvfile.read, "text": text.read}[fmt]
            records = reader(stream)
        return library.import_records(
            records,
            update=update,
            progress=lambda _: progress(raw.tell() if raw.seekable() else 0, total),
        )
    except UnicodeDecodeError as error:
        raise FormatError(
            f"{path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    finally:
        if raw is not sys.stdin.buffer:
            raw.close()


def export(library: Library, fmt: str, out: TextIO, *, hierarchical: bool = False) -> int:
    bookmarks = library.iterate()
    if fmt == "html":
        return netscape.write(bookmarks, out, hierarchical=hierarchical)
    writer = {"json": jsonfile.write, "csv": csvfile.write, "markdown": markdown.write}[fmt]
    return writer(bookmarks, out)
