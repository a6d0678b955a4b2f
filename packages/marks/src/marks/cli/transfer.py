"""`marks import ...` and `marks export ...`."""

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from marks.cli import Group, global_options, state
from marks.cli import output as show
from marks.cli.browser import add_import_commands as add_browser_imports
from marks.printable import escape

if TYPE_CHECKING:
    from marks.importing import ProblemLog
    from marks.wire import ImportReport


class ImportGroup(Group):
    """`marks import FORMAT FILE`, or `marks import FILE` to detect the format from the file."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "auto", self.commands["auto"], args
        return super().resolve_command(ctx, args)


@click.group(name="import", cls=ImportGroup)
@global_options
def import_() -> None:
    """Import bookmarks from files: `marks import FILE` detects the format.

    Entries that are invalid are skipped and counted (--verbose lists them; --strict refuses the
    whole file instead). An import is one transaction: a file that is not its format, an error
    or Ctrl-C leaves the library as it was.
    """


def _run_import(fmt: str, path: str, verbose: bool, **options: Any) -> None:
    from marks.importing import ProblemLog

    s = state()
    with ProblemLog() as log:
        # Lines are spooled only when they will be shown: the JSON report carries them all.
        shown = verbose or s.format == "json"
        report = _import(fmt, path, log if shown else _drop, **options)
        _show(report, log, verbose)


def _drop(line: str) -> None:
    """The report's lines when nobody will read them (the counts still say what happened)."""


def _import(fmt: str, path: str, problems: Callable[[str], None], **options: Any) -> "ImportReport":
    from marks.transfer import import_file

    s = state()
    bar = None
    if sys.stderr.isatty() and path != "-":
        bar = click.progressbar(
            length=max(1, os.path.getsize(path)), label="importing", file=sys.stderr
        )
    position = [0]

    def progress(done: int, total: int) -> None:
        if bar is not None and done > position[0]:
            bar.update(done - position[0])
            position[0] = done

    with bar if bar is not None else contextlib.nullcontext():
        # Parsing in a second process: the CLI has no threads to lose in the fork.
        return import_file(
            s.library, fmt, path, progress=progress, problems=problems, separate=True, **options
        )


def _show(report: "ImportReport", log: "ProblemLog", verbose: bool) -> None:
    from marks.importing import SHOWN, report_json

    s = state()
    for warning in report.warnings:
        click.echo(f"warning: {escape(warning)}", err=True)
    report.problems_omitted = max(0, log.count - SHOWN)
    if s.format == "json":
        show.emit_json_chunks(report_json(report, log.first()))
    else:
        click.echo(
            f"added {report.added}, updated {report.updated}, skipped {report.skipped}, "
            f"invalid {report.invalid}",
            err=True,
        )
        if report.repaired:
            listed = "listed below" if verbose else "--verbose lists them"
            click.echo(f"{report.repaired} repaired ({listed})", err=True)
        if report.undated:
            click.echo(f"{report.undated} without a date: import time used", err=True)
    if verbose:
        for line in log.first():
            click.echo(f"  {escape(line)}", err=True)
        if report.problems_omitted:
            saved = _save_log(log)
            click.echo(
                f"  ... and {report.problems_omitted} more: all {log.count} lines are in {saved}",
                err=True,
            )


def _save_log(log: "ProblemLog") -> str:
    """Every line of a long report, in a new file under marks' state directory."""
    import datetime as dt

    from marks.settings import state_dir

    directory = state_dir() / "imports"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    for attempt in range(1000):
        path = directory / f"import-{stamp}{f'-{attempt}' if attempt else ''}.log"
        try:
            log.save(str(path))
            return str(path)
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory}: no free name for the import log")


def _import_command(fmt: str, summary: str, *, hidden: bool = False) -> click.Command:
    @click.argument("path", type=click.Path(dir_okay=False, allow_dash=True))
    @click.option(
        "--update",
        is_flag=True,
        help="Merge into bookmarks that exist (tags, earliest added, most visits).",
    )
    @click.option(
        "--strict",
        is_flag=True,
        help="Refuse the whole file if any entry is invalid or needs a repair.",
    )
    @click.option(
        "--verbose", "-v", is_flag=True, help="List every skipped, merged and invalid entry."
    )
    def command(path: str, verbose: bool, **options: Any) -> None:
        _run_import(fmt, path, verbose, **options)

    if fmt in ("html", "auto"):
        command = click.option(
            "--base-url",
            metavar="URL",
            help="Resolve relative links (Shaarli notes, `?abc123`) against this address.",
        )(command)
    if fmt in ("html", "csv", "text", "auto"):
        command = click.option(
            "--encoding",
            metavar="NAME",
            help="The file's character set (default: its BOM or declaration, else UTF-8).",
        )(command)
    return import_.command(name=fmt, help=summary, hidden=hidden)(command)


_import_command(
    "html",
    "A Netscape bookmark file (browsers, Pocket, Delicious, Pinboard, Shaarli, linkding...).",
)
_import_command(
    "json",
    "JSON: marks' export, Chrome's Bookmarks, Firefox backups, Pinboard, Omnivore, linkding.",
)
_import_command("csv", "CSV (marks, Pocket, Instapaper, Raindrop...), or one URL per row.")
_import_command("text", "Plain text, one URL per line.")
_import_command("auto", "Detect the format from the file's content.", hidden=True)
add_browser_imports(import_)


@click.group(cls=Group)
@global_options
def export() -> None:
    """Export every bookmark to a file or stdout."""


def _write(fmt: str, target: str | None, **options: Any) -> None:
    from marks.transfer import export as run_export

    library = state().library
    if target in (None, "-"):
        out = sys.stdout if fmt == "json" else show.text_out()
        count = run_export(library, fmt, out, **options)
    else:
        # Write beside the target and rename: a failed export never leaves half a file.
        directory = os.path.dirname(os.path.abspath(target))
        fd, temporary = tempfile.mkstemp(prefix=".marks-export-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                count = run_export(library, fmt, out, **options)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    click.echo(f"exported {count} bookmark(s)", err=True)


def _export_command(fmt: str, summary: str, hierarchical: bool = False) -> None:
    def command(output_file: str | None, **options: Any) -> None:
        _write(fmt, output_file, **options)

    command = click.option(
        "--file",
        "-f",
        "output_file",
        type=click.Path(dir_okay=False),
        help="Write to this file (default: stdout).",
    )(command)
    if hierarchical:
        command = click.option(
            "--hierarchical",
            is_flag=True,
            help="Folders from tags (each bookmark under its first tag).",
        )(command)
    export.command(name=fmt, help=summary)(command)


_export_command("html", "Netscape HTML that browsers import.", hierarchical=True)
_export_command("json", "JSON with every field (a lossless round trip).")
_export_command("csv", "CSV with a header row.")
_export_command("markdown", "Markdown lists grouped by top-level tag.")
