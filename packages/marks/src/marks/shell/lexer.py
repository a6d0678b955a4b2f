"""Reading a shell line: sh-like words and quotes, `;` between commands, `!` for the system.

`parse()` never raises anything but ShellError, whatever it is given.
"""

import shlex

import msgspec


class ShellError(Exception):
    """A command failed; the message is the one line the shell prints before the next prompt."""


class Invocation(msgspec.Struct, frozen=True):  # not a dataclass: see vfs.Selection
    name: str
    args: tuple[str, ...] = ()
    system: str | None = None  # for `!command`: the text handed to the system shell


def _words(text: str) -> list[list[str]]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    lexer.commenters = ""  # `#tag` is a search term, not a comment
    commands: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token and set(token) == {";"}:
                commands.extend([] for _ in token)
            else:
                commands[-1].append(token)
    except ValueError as error:  # "No closing quotation", "No escaped character"
        raise ShellError(f"cannot read the line: {str(error).lower()}") from None
    return [words for words in commands if words]


def _commands(line: str) -> list[str]:
    """The line cut at every `;` outside quotes (sh's rules: no escapes inside '...', a
    backslash escapes the next character elsewhere). A `!command` ends at its own `;` too."""
    pieces: list[str] = []
    current: list[str] = []
    quote, escaped = "", False
    for character in line:
        if escaped:
            escaped = False
        elif character == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == ";":
            pieces.append("".join(current))
            current = []
            continue
        current.append(character)
    pieces.append("".join(current))
    return pieces


def parse(line: str, aliases: dict[str, str] | None = None) -> list[Invocation]:
    """The commands on one line, with aliases expanded (once, as in sh)."""
    if "\x00" in line:
        raise ShellError("cannot read the line: it contains a NUL character")
    invocations = []
    for piece in _commands(line):
        stripped = piece.strip()
        if stripped.startswith("!"):
            command = stripped[1:].strip()
            if not command:
                raise ShellError("! needs a command to run")
            invocations.append(Invocation("!", system=command))
            continue
        for words in _words(stripped):
            name, *args = words
            if aliases and name in aliases:
                expanded = _words(aliases[name])
                if len(expanded) != 1:
                    raise ShellError(f"alias {name} must stand for one command")
                name, *more = expanded[0]
                args = [*more, *args]
            invocations.append(Invocation(name, tuple(args)))
    return invocations
