"""Plain text: one URL per line. Blank lines and `#` comments are ignored; anything else that is
not a URL is reported as skipped (by the library, as invalid), never silently dropped."""

from collections.abc import Iterator
from typing import TextIO

from marks.formats import Record


def read(stream: TextIO) -> Iterator[Record]:
    for number, line in enumerate(stream, 1):
        text = line.strip()
        if text and not text.startswith("#"):
            yield Record(url=text, where=f"line {number}", undated=True)
