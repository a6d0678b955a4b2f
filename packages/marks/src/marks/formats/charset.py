"""Turning an import file's bytes into text: BOMs first, then what the file declares, then UTF-8;
HTML that is none of these is read as Windows-1252 (what browsers assume), with a warning.

HTML is decoded as it is read, CHUNK bytes at a time; the BOM and `<meta charset>` are looked for
in its first HEAD bytes. Whether undeclared HTML is UTF-8 is only known at its
end, so such a file is read twice (once to check, once to decode; a pipe is copied to a
temporary file on the way), which keeps memory flat and the text the same as decoding it whole.
"""

import codecs
import itertools
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO

CHUNK = 1 << 18
HEAD = 4096
_UNICODE = ("utf-8", "utf-16", "utf-16-le", "utf-16-be")
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE, whose BOM is its prefix
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def bom(head: bytes) -> tuple[str | None, int]:
    """The encoding a byte-order mark names and the mark's length, or (None, 0)."""
    for mark, name in _BOMS:
        if head.startswith(mark):
            return name, len(mark)
    return None, 0


def declared(head: bytes) -> str | None:
    """The charset of a `<meta charset>` or `<meta http-equiv content="...; charset=...">`."""
    match = _META.search(head)
    if match is None:
        return None
    name = match.group(1).decode("ascii").lower()
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def html_text(
    raw: BinaryIO, *, encoding: str | None = None, warnings: list[str] | None = None
) -> Iterator[str]:
    """The document's text in pieces; `encoding` (the user's) overrides what the file says.
    A warning about how it was decoded goes to `warnings` before the first piece."""
    start = raw.tell() if raw.seekable() else None
    head = _read(raw, HEAD)
    name, skip = (encoding, 0) if encoding is not None else bom(head[:4])
    body: Iterable[bytes] = _chained(head[skip:], raw)
    spool = None
    meta = declared(head) if name is None else None
    if name is None and meta and meta not in _UNICODE:
        name = meta
    elif name is None:
        if start is None:  # a pipe: what the check reads is kept on disk to be read again
            spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed below, after that reading)
            body = _copied(body, spool)
        error = _utf8_error(body)  # stops at the first error: the rest is read only once
        if spool is None:
            raw.seek(start or 0)
            body = _chained(b"", raw)
        else:
            spool.seek(0)
            body = itertools.chain(_chained(b"", spool), _chained(b"", raw))
        name = "utf-8" if error is None else "cp1252"
        if error is not None and warnings is not None:
            where = f"byte {error}"
            warnings.append(
                f"declared {meta} but not valid {meta} ({where}): read as Windows-1252"
                if meta
                else f"not UTF-8 ({where}) and no charset declared: read as Windows-1252"
            )
    try:
        decoder = _decoder(name, head[skip:])
        for chunk in body:
            text = decoder.decode(chunk)
            if text:
                yield text
        text = decoder.decode(b"", final=True)
        if text:
            yield text
    finally:
        if spool is not None:
            spool.close()


def _decoder(name: str, head: bytes) -> codecs.IncrementalDecoder:
    """An incremental decoder giving what `bytes.decode(name, errors="replace")` gives: UTF-16
    and UTF-32 without a BOM are read in the machine's byte order, as `decode` reads them
    (their incremental decoders refuse such a file)."""
    family = codecs.lookup(name).name
    if family in ("utf-16", "utf-32"):
        marks = {"utf-16": _BOMS[3:], "utf-32": _BOMS[:2]}[family]
        if not any(head.startswith(mark) for mark, _ in marks):
            name = f"{family}-{'le' if sys.byteorder == 'little' else 'be'}"
    return codecs.getincrementaldecoder(name)(errors="replace")


def _read(raw: BinaryIO, size: int) -> bytes:
    """`size` bytes, or fewer at the end (a pipe's read may give less than asked)."""
    data = b""
    while len(data) < size:
        more = raw.read(size - len(data))
        if not more:
            break
        data += more
    return data


def _chained(first: bytes, raw: BinaryIO) -> Iterator[bytes]:
    if first:
        yield first
    while chunk := raw.read(CHUNK):
        yield chunk


def _copied(chunks: Iterable[bytes], spool: BinaryIO) -> Iterator[bytes]:
    for chunk in chunks:
        spool.write(chunk)
        yield chunk


def _utf8_error(chunks: Iterable[bytes]) -> int | None:
    """The offset of the first byte that is not UTF-8, or None: what decoding it whole says."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    chunk = b""
    try:
        for chunk in chunks:
            decoder.decode(chunk)
            offset += len(chunk)
        chunk = b""
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        # The error counts from the bytes the decoder held back (an unfinished character) and
        # then the chunk it was given; those held bytes are the ones just before the chunk.
        held = len(error.object) - len(chunk)
        return offset - held + error.start
    return None
