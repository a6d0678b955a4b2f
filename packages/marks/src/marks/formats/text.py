"""Plain text: one URL per line. Blank lines and `#` comments are ignored; anything else that is
not a URL is reported as skipped (by the library, as invalid), never silently dropped."""

from collections.abc import Iterator
from typing import TextIO

from marks.library import Record


def read(stream: TextIO) -> Iterator[Record]:
    for line in stream:
        text = line.strip()
        if text and not text.startswith("#"):
            yield Record(url=text)
