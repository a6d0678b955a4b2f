"""What a shell session holds, and what every shell command is built on.

`Session` is what a shell remembers between commands; `Base` runs one command (mapping the
domain's errors to the one line a shell prints) and holds the helpers the commands share:
locating a path, the bookmark a command means, asking before a bulk change. `@command` records
each command's usage for `help`. The commands themselves: `marks.shell.reading` (moving around,
looking), `marks.shell.changing` (changing bookmarks), `marks.shell.commands` (the shell itself).
"""

import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

from marks import clock, vfs
from marks.exceptions import MarksError
from marks.library import Library
from marks.listing import Filesystem
from marks.printable import escape
from marks.rows import NAMES
from marks.shell.lexer import Invocation, ShellError
from marks.wire import Bookmark

FIELDS = (*NAMES[1:], "id")  # what `ls` shows in a bookmark: its fields, the id last
EDITABLE = ("title", "description", "url", "tags")
HELP: dict[str, tuple[str, str]] = {}  # name -> (usage, summary), filled by @command

Handler = TypeVar("Handler", bound=Callable[..., None])


def command(usage: str, summary: str) -> Callable[[Handler], Handler]:
    def register(function: Handler) -> Handler:
        HELP[function.__name__.removeprefix("do_").replace("_", "-")] = (usage, summary)
        return function

    return register


class Session:
    """What a shell remembers between commands.

    A plain class, not a dataclass: `dataclasses` costs every `shell -c` start-up (see
    vfs.Selection)."""

    def __init__(
        self,
        library: Library,
        write: Callable[[str], None],
        confirm: Callable[[str], bool | None],  # None: nobody can be asked (stdin no terminal)
        now: Callable[[], dt.datetime] = clock.now,
        cwd: str = "/",
        previous: str = "/",
        aliases: dict[str, str] | None = None,
        save_aliases: Callable[[dict[str, str]], None] = lambda aliases: None,
        history: Callable[[], list[str]] = list,
        edit_text: Callable[[str, str], str] | None = None,
        config: dict[str, Any] | None = None,  # the user's settings (health rules)
        notify: Callable[[str], None] = lambda text: None,  # a remark beside the output
        noted: set[str] | None = None,  # remarks made already: each is made once
    ) -> None:
        self.library = library
        self.write = write
        self.confirm = confirm
        self.now = now
        self.cwd = cwd
        self.previous = previous
        self.aliases = {} if aliases is None else aliases
        self.save_aliases = save_aliases
        self.history = history
        self.edit_text = edit_text
        self.config = {} if config is None else config
        self.notify = notify
        self.noted = set() if noted is None else noted
        self.fs = Filesystem(library, now)


class Base:
    def __init__(self, session: Session) -> None:
        self.s = session

    def run(self, invocation: Invocation) -> None:
        if invocation.name == "!":
            return self.system(invocation.system or "")
        method = getattr(self, "do_" + invocation.name.replace("-", "_"), None)
        if method is None or invocation.name not in HELP:
            raise ShellError(f"{invocation.name}: command not found (try `help`)")
        try:
            method(list(invocation.args))
        except MarksError as error:  # the domain's errors, mapped once here
            raise ShellError(f"{invocation.name}: {error}") from None
        except UnicodeEncodeError:  # a lone surrogate typed or pasted: SQLite cannot store it
            raise ShellError(f"{invocation.name}: the text is not valid Unicode") from None

    # --- helpers ---------------------------------------------------------------------------------

    def out(self, text: str = "") -> None:
        # Titles and descriptions came from pages and files: shown, never obeyed.
        self.s.write(escape(text, keep="\n\t") + "\n")

    def here(self, path: str = ".") -> vfs.Location:
        return self.s.fs.locate(self.s.cwd, path)

    def target(self, args: list[str], name: str) -> Bookmark:
        """The bookmark a single-bookmark command means: an id or path, or the current one."""
        if args:
            spec = args[0]
            if spec.isdigit():
                return self.s.library.get(int(spec))
            location = self.here(spec)
        else:
            location = self.here()
        if location.bookmark_id is None:
            raise ShellError(f"{name}: not in a bookmark (give an id, or cd into one)")
        return self.s.library.get(location.bookmark_id)

    def ask(self, question: str, name: str, force: str = "") -> None:
        """Ask before a bulk or destructive change; like the CLI, refuse when nobody can be
        asked (stdin is not a terminal) unless told to go ahead (`--yes`, or the command's own
        `force` option such as `rm -f`)."""
        answer = self.s.confirm(question)
        if answer is None:
            how = f"{name} {force}, or " if force else ""
            raise ShellError(
                f"{name}: {question} -- not asked (no terminal): use {how}marks --yes shell"
            )
        if not answer:
            raise ShellError(f"{name}: cancelled, nothing changed")

    def many(
        self, location: vfs.Location, verb: str, name: str, force: str | None = None
    ) -> list[int]:
        """The bookmarks a bulk command acts on here, after asking (`force`: the command's
        option that skips the question, "" when given, None when it has none)."""
        ids = self.s.fs.ids(location)
        if not ids:
            raise ShellError(f"{name}: no bookmarks in {location.path}")
        if (len(ids) > 1 or not location.is_bookmark) and force != "":
            self.ask(f"{verb} {len(ids)} bookmark(s) in {location.path}?", name, force or "")
        return ids

    def system(self, text: str) -> None:
        # The person typed a command for their own system shell, as `!` means in every shell.
        import subprocess

        result = subprocess.run(text, shell=True, check=False, capture_output=True, text=True)  # noqa: S602
        self.s.write(result.stdout + result.stderr)
        if result.returncode != 0:
            raise ShellError(f"!: exit status {result.returncode}")


def _line(text: str) -> str:
    """One output line per bookmark, whatever line breaks its title or snippet holds."""
    return "".join(" " if ch != " " and ch.isspace() else ch for ch in text)


def _show(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(value)
    if isinstance(value, dt.datetime):
        return clock.to_text(value) or ""
    return str(value)
