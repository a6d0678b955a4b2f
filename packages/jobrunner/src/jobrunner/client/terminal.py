"""Server-provided text made safe to show on a terminal.

Job ids, output names, failure reasons, error details and job logs all come from the server, and
through it from a job written by anyone. Written to a terminal as they are, control characters
could move the cursor, rewrite earlier lines, set the window title, write the clipboard (OSC 52)
or reorder text (bidirectional overrides). `printable` shows each such character as a visible
escape instead, so what a user reads is what was sent.
"""

import unicodedata

# Categories never shown as themselves: controls (C0, DEL, C1), format characters (bidi
# overrides, zero-width joiners), surrogates, private use, unassigned, line/paragraph separators.
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, keep: str = "") -> str:
    """`text` with every hidden character as a visible escape (`\\x1b`, `\\u202e`), except those
    in `keep` (a log keeps "\\n\\t")."""
    if text.isprintable():  # the common case, at C speed (isprintable is False for "\n" too)
        return text
    return "".join(
        char if char in keep or unicodedata.category(char) not in _HIDDEN else _escape(char)
        for char in text
    )


def json_for_terminal(text: str) -> str:
    """JSON text with the hidden characters of its strings as JSON escapes (`\\u001b`): still
    valid JSON that decodes to the same value, never an escape sequence on the screen.
    (Outside its strings JSON has only ASCII punctuation and whitespace, which stay.)"""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_json_escape(char) for char in text)


def _json_escape(char: str) -> str:
    if char in "\n\t " or unicodedata.category(char) not in _HIDDEN:
        return char
    units = char.encode("utf-16-be", "surrogatepass")  # U+10000 and above: a surrogate pair
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
