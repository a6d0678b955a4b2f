"""Turning an import file's bytes into text: BOMs first, then what the file declares, then UTF-8;
HTML that is none of these is read as Windows-1252 (what browsers assume), with a warning."""

import codecs
import re

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


def decode_html(data: bytes) -> tuple[str, list[str]]:
    """The document's text and any warnings about how it was decoded."""
    name, skip = bom(data[:4])
    if name:
        return data[skip:].decode(name, errors="replace"), []
    meta = declared(data[:4096])
    if meta and meta not in ("utf-8", "utf-16", "utf-16-le", "utf-16-be"):
        return data.decode(meta, errors="replace"), []
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as error:
        where = f"byte {error.start}"
        text = data.decode("cp1252", errors="replace")
        warning = f"not UTF-8 ({where}) and no charset declared: read as Windows-1252"
        if meta:
            warning = f"declared {meta} but not valid {meta} ({where}): read as Windows-1252"
        return text, [warning]
