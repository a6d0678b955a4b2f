"""Import and export: choosing the format, decoding the file, and one transaction per import.

A reader fails with FormatError (one line) when the file is not its format; since the import is
one transaction, such a failure -- or a crash, or Ctrl-C -- leaves the library as it was.
"""

import codecs
import io
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO, cast

from marks import importchecks, importing
from marks.formats import FormatError, Record, charset, csvfile, jsonfile, markdown, netscape, text
from marks.library import Library
from marks.reader_process import ReaderProcess
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


def detect(head: bytes) -> str:
    """The format of a file from its first bytes: JSON, Netscape HTML, CSV, or plain text."""
    name, skip = charset.bom(head[:4])
    sample = head[skip:].decode(name or "utf-8", errors="replace").lstrip()
    lowered = sample[:4096].lower()
    if sample[:1] in ("{", "["):
        return "json"
    if sample[:1] == "<" or "<!doctype netscape" in lowered or "<dl" in lowered:
        return "html"
    first = sample.split("\n", 1)[0]
    if any(sep in first for sep in (",", ";", "\t")):
        return "csv"
    return "text"


def _buffered(raw: BinaryIO) -> io.BufferedReader:
    """`raw` with `peek` (a buffer around it unless it has one)."""
    if isinstance(raw, io.BufferedReader):
        return raw
    # typing.BinaryIO declares no `readinto`, which BufferedReader's stub asks of its stream;
    # every binary stream handed in here (files, stdin's buffer, BytesIO, uploads) has it.
    return io.BufferedReader(cast(io.RawIOBase, raw))


def _known(encoding: str) -> None:
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise FormatError(f"unknown encoding {encoding!r}") from None


def _text(raw: BinaryIO, encoding: str | None) -> io.TextIOWrapper:
    """A text stream for CSV and plain text: `encoding` if given, else a BOM's, else UTF-8."""
    if encoding is not None:
        _known(encoding)
        return io.TextIOWrapper(raw, encoding=encoding, newline="")
    buffered = _buffered(raw)
    name, _ = charset.bom(buffered.peek(4)[:4])
    name = {"utf-8": "utf-8-sig", "utf-16-le": "utf-16", "utf-16-be": "utf-16"}.get(
        name or "utf-8", name or "utf-8"
    )
    return io.TextIOWrapper(buffered, encoding=name, newline="")


def records(
    raw: BinaryIO,
    fmt: str,
    *,
    encoding: str | None = None,
    base_url: str | None = None,
    warnings: list[str] | None = None,
) -> Iterator[Record]:
    """The records of an import file in a format (`auto` detects it)."""
    if fmt == "auto":
        buffered = _buffered(raw)
        fmt, raw = detect(buffered.peek(4096)[:4096]), buffered
    if fmt == "json":
        return jsonfile.read(raw)
    if fmt == "html":
        if encoding is not None:
            _known(encoding)
        pieces = charset.html_text(raw, encoding=encoding, warnings=warnings)
        return netscape.read(pieces, base_url=base_url)
    if fmt in ("csv", "text"):
        reader = csvfile.read if fmt == "csv" else text.read
        return reader(_text(raw, encoding))
    raise FormatError(f"unknown import format {fmt!r} (use {', '.join(IMPORT_FORMATS)})")


def _position(raw: BinaryIO) -> int:
    """How far the file has been read (0 if not known: a pipe, or a reader that closed it)."""
    return raw.tell() if not raw.closed and raw.seekable() else 0


def import_file(
    library: Library,
    fmt: str,
    path: str,
    *,
    update: bool = False,
    strict: bool = False,
    encoding: str | None = None,
    base_url: str | None = None,
    progress: Callable[[int, int], None] = lambda done, total: None,
    problems: Callable[[str], None] | None = None,
    separate: bool = False,
) -> ImportReport:
    """Import a file; `progress(bytes_read, total_bytes)` is called as records arrive;
    `problems`, if given, takes the report's lines as they come (see `importing.import_records`).
    `separate`: the file is read and parsed in a second process (`marks.reader_process`; the CLI
    only, and not for stdin)."""
    raw = _open(path)
    total = Path(path).stat().st_size if path != "-" else 0
    warnings: list[str] = []
    reader = None
    try:
        found: Iterable[importchecks.Entry]
        if separate and path != "-":
            # The checks run there too (they read no database): this process only writes.
            reader = ReaderProcess(
                lambda found_warnings: importchecks.Checker().entries(
                    records(raw, fmt, encoding=encoding, base_url=base_url, warnings=found_warnings)
                ),
                lambda: _position(raw),
                path,
                importchecks.Entry,
            )
            found = reader
        else:
            found = importchecks.Checker().entries(
                records(raw, fmt, encoding=encoding, base_url=base_url, warnings=warnings)
            )
        report = importing.import_entries(
            library,
            found,
            update=update,
            strict=strict,
            progress=lambda _: progress(
                _position(raw) if reader is None else reader.position, total
            ),
            problems=problems,
        )
        if reader is not None:
            warnings = reader.warnings
    except UnicodeDecodeError as error:
        raise FormatError(
            f"{path} is not {error.encoding.upper()} text ({error.reason} at byte {error.start}); "
            "name its encoding with --encoding"
        ) from None
    finally:
        if raw is not sys.stdin.buffer:
            raw.close()
    report.warnings[:0] = warnings
    return report


def export(library: Library, fmt: str, out: TextIO, *, hierarchical: bool = False) -> int:
    bookmarks = library.iterate()
    if fmt == "html":
        return netscape.write(bookmarks, out, hierarchical=hierarchical)
    writer = {"json": jsonfile.write, "csv": csvfile.write, "markdown": markdown.write}[fmt]
    return writer(bookmarks, out)
