"""`marks shell`: the library as a filesystem, interactive (prompt-toolkit) or one-shot (`-c`).

Every line is parsed by `lexer`, run by `commands`, and any failure prints one line; nothing a
person types ends the session except `exit` or Ctrl-D.
"""

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from marks.library import Library
from marks.printable import escape
from marks.shell.commands import Commands, Session
from marks.shell.lexer import ShellError, parse

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession


def run_line(commands: Commands, line: str, report: Callable[[str], None]) -> bool:
    """Run one line; False if any command on it failed (after saying why)."""

    def error(text: str) -> None:
        report(escape(text))  # one line: what a person typed may hold line breaks or escapes

    if line.strip() in ("exit", "quit", "logout"):
        raise EOFError
    ok = True
    try:
        invocations = parse(line, commands.s.aliases)
    except ShellError as problem:
        error(str(problem))
        return False
    for invocation in invocations:
        if invocation.name in ("exit", "quit", "logout"):
            raise EOFError
        try:
            commands.run(invocation)
        except ShellError as problem:
            error(str(problem))
            ok = False
        except BrokenPipeError:
            raise  # the reader went away (`marks shell -c ls | head`): stop quietly
        except Exception as problem:  # a bug must not end the session: report it, carry on
            error(f"{invocation.name}: unexpected error: {type(problem).__name__}: {problem}")
            ok = False
    return ok


def _to_stderr(text: str) -> None:
    print(f"marks: {text}", file=sys.stderr)


def run_script(session: Session, script: str, error: Callable[[str], None] = _to_stderr) -> int:
    """One-shot mode: `;`-separated commands (and lines); 1 if any failed."""
    commands = Commands(session)
    failed = False
    for line in script.splitlines() or [""]:
        try:
            failed |= not run_line(commands, line, error)
        except EOFError:
            break
    return 1 if failed else 0


def interactive(session: Session, history_file: str) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    from marks.shell.completion import ShellCompleter

    history = FileHistory(history_file)
    prompt: PromptSession[str] = PromptSession(
        history=history, completer=ShellCompleter(session), complete_while_typing=False
    )
    session.history = lambda: list(reversed(list(history.load_history_strings())))
    session.edit_text = lambda label, text: prompt.prompt(label, default=text)
    session.confirm = lambda question: _ask(prompt, question)
    commands = Commands(session)
    print("marks shell: `help` lists commands, `tutorial` shows the way around, Ctrl-D leaves.")
    while True:
        try:
            line = prompt.prompt(f"marks:{session.cwd}> ")
        except KeyboardInterrupt:
            continue  # Ctrl-C abandons the line, as in any shell
        except EOFError:
            return 0
        try:
            run_line(commands, line, lambda text: print(f"marks: {text}"))
        except EOFError:
            return 0
        except KeyboardInterrupt:
            print("interrupted")


def _ask(prompt: "PromptSession[str]", question: str) -> bool:
    try:
        return prompt.prompt(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except (KeyboardInterrupt, EOFError):
        return False


__all__ = ["Library", "Session", "interactive", "run_script"]
