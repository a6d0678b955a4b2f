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
UNSAFE = "".join(
    chr(code)
    for span in ((0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x202E), (0x2066, 0x2069))
    for code in range(span[0], span[1] + 1)
)


@functools.cache
def _pattern(keep: str) -> re.Pattern[str]:
    # One character class of the unsafe characters less `keep`: the regex engine then skips safe
    # text quickly (a lookahead before the class made it try every position: `ls /tags` spent 36
    # million instructions escaping its 12,000 names).
    unsafe = "".join(re.escape(ch) for ch in UNSAFE if ch not in keep)
    return re.compile(f"[{unsafe}]" if unsafe else "(?!)")


def _visible(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # `\x1b`, `\n`, `\u202e`: what Python would write


def escape(text: str, keep: str = "") -> str:
    """`text` with every control character except those in `keep` (say "\\n\\t" for text that may
    span lines) written as a visible escape."""
    shown = text
    for kept in keep:  # a listing's line breaks are kept, and Python calls them unprintable
        shown = shown.replace(kept, "")
    if shown.isprintable():  # no control, format or separator character left: none unsafe
        return text  # (and the pattern, 3 million instructions to compile, is not needed)
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
