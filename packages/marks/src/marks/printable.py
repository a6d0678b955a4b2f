"""Text from the library made safe to show on a terminal.

A title, tag or description came from a web page or an imported file, and may hold what a terminal
obeys rather than shows: `ESC[2J` clears the screen, OSC 52 (`ESC]52;c;...BEL`) sets the
clipboard, a bare CR lets a line overwrite itself, a bidi override reorders what follows. Every
front end that prints such text for a person (the CLI's table, plain, urls and CSV on a terminal,
its messages on stderr, the shell) passes it through `escape`, which writes each such character as
a visible escape (`\\x1b`, `\\r`, `\\u202e`) and leaves every other character as it is (emoji
joiners, accents, scripts). JSON output and files written for programs carry the text exactly.
"""

import functools
import re
from typing import TextIO

# C0 controls, DEL and the C1 controls (0x9B is an 8-bit CSI, 0x9D an 8-bit OSC), the line and
# paragraph separators, and the bidi embeddings, overrides and isolates ("Trojan Source").
_UNSAFE = "\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"


@functools.cache
def _pattern(keep: str) -> re.Pattern[str]:
    if not keep:
        return re.compile(f"[{_UNSAFE}]")
    return re.compile(f"(?![{re.escape(keep)}])[{_UNSAFE}]")


def _visible(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # `\x1b`, `\n`, `\u202e`: what Python would write


def escape(text: str, keep: str = "") -> str:
    """`text` with every control character except those in `keep` (say "\\n\\t" for text that may
    span lines) written as a visible escape."""
    return _pattern(keep).sub(_visible, text)


class Escaping:
    """A text stream that escapes what is written through it (keeping line breaks and tabs):
    for a file format (CSV, Markdown, HTML) sent to a terminal."""

    def __init__(self, out: TextIO, keep: str = "\n\t") -> None:
        self.out = out
        self.keep = keep

    def write(self, text: str) -> int:
        return self.out.write(escape(text, self.keep))

    def flush(self) -> None:
        self.out.flush()
