"""The shell's commands: each a thin call into `marks.library` or `marks.listing`.

Commands act on the current location: inside a bookmark they act on it; inside a directory,
bulk ones act on its bookmarks after asking. Every failure is a ShellError (one line).
`Commands` gathers them: moving around and looking (`marks.shell.reading`), changing bookmarks
(`marks.shell.changing`) and, here, the shell's own (help, history, alias...). What a session
holds and the helpers they share are in `marks.shell.session`.
"""

import re
import shlex

from marks.shell.changing import Changing
from marks.shell.lexer import ShellError
from marks.shell.reading import Reading
from marks.shell.session import HELP, Session, command

__all__ = ["HELP", "Commands", "Session"]


class Commands(Reading, Changing):
    # --- the shell itself ------------------------------------------------------------------------

    @command("help [COMMAND]", "list commands, or explain one")
    def do_help(self, args: list[str]) -> None:
        if args:
            if args[0] not in HELP:
                raise ShellError(f"help: no command {args[0]!r}")
            usage, summary = HELP[args[0]]
            self.out(f"{usage}\n  {summary}")
            return
        width = max(len(usage) for usage, _ in HELP.values())
        for name in sorted(HELP):
            usage, summary = HELP[name]
            self.out(f"  {usage:<{width}}  {summary}")
        self.out("  !COMMAND  run a system command; exit or Ctrl-D leaves")

    @command("history", "the commands you typed, kept between sessions")
    def do_history(self, args: list[str]) -> None:
        for number, line in enumerate(self.s.history(), 1):
            self.out(f"{number:>5}  {line}")

    @command("clear", "clear the screen")
    def do_clear(self, args: list[str]) -> None:
        self.s.write("\x1b[2J\x1b[H")

    @command("alias [NAME=VALUE]", "define or list aliases (kept in the config file)")
    def do_alias(self, args: list[str]) -> None:
        if not args:
            for name, value in sorted(self.s.aliases.items()):
                self.out(f"alias {name}={shlex.quote(value)}")
            return
        for spec in args:
            name, sep, value = spec.partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z_][\w-]*", name) or not value.strip():
                raise ShellError("alias: usage: alias NAME='COMMAND ARGS'")
            self.s.aliases[name] = value
        self.s.save_aliases(self.s.aliases)

    @command("unalias NAME", "forget an alias")
    def do_unalias(self, args: list[str]) -> None:
        for name in args:
            if self.s.aliases.pop(name, None) is None:
                raise ShellError(f"unalias: no alias {name}")
        self.s.save_aliases(self.s.aliases)

    @command("tutorial", "a short guided tour")
    def do_tutorial(self, args: list[str]) -> None:
        from marks.shell.tutorial import TEXT

        self.out(TEXT.strip())
