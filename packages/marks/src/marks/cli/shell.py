"""`marks shell`: the interactive shell, or `-c` for scripts."""

import os
import sys

import click

from marks.cli import Command, global_options, state


@click.command(cls=Command)
@global_options
@click.option(
    "-c",
    "script",
    metavar="COMMANDS",
    help="Run these commands (separated by ; or newlines) and exit.",
)
def shell(script: str | None) -> None:
    """Browse the library as a filesystem (cd, ls, find, tag, star, ...)."""
    from marks import settings
    from marks.shell import Session, interactive, run_script

    s = state()
    aliases = dict(s.config["aliases"])

    def answer(question: str) -> bool | None:
        if s.yes:
            return True
        if not sys.stdin.isatty():  # as the CLI: nobody to ask, so nothing is done
            return None
        sys.stderr.write(f"{question} [y/N] ")
        sys.stderr.flush()
        reply = sys.stdin.readline()
        sys.stderr.write(reply if reply.endswith("\n") else "\n")
        return reply.strip().lower() in ("y", "yes")

    def remember(values: dict[str, str]) -> None:
        settings.store_value("aliases", dict(values))

    history = settings.state_file("history")

    def past() -> list[str]:  # the interactive shell's history, oldest first
        if not os.path.exists(history):
            return []
        from prompt_toolkit.history import FileHistory

        return list(reversed(list(FileHistory(history).load_history_strings())))

    def write(text: str) -> None:
        sys.stdout.write(text)

    def notify(text: str) -> None:
        click.echo(f"marks: {text}", err=True)

    session = Session(
        s.library,
        write=write,
        confirm=answer,
        aliases=aliases,
        save_aliases=remember,
        history=past,
        config=s.config,
        notify=notify,
    )
    context = click.get_current_context()
    if script is not None:
        context.exit(run_script(session, script))  # the exit code reaches the CLI's edge
    os.makedirs(os.path.dirname(history), exist_ok=True)
    context.exit(interactive(session, history))
