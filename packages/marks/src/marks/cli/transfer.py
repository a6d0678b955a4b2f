"""`marks import ...` and `marks export ...`."""

import contextlib
import os
import sys
import tempfile

import click

from marks.cli import Group, global_options, state
from marks.cli import output as show
from marks.cli.browser import add_import_commands as add_browser_imports


@click.group(name="import", cls=Group)
@global_options
def import_() -> None:
    """Import bookmarks from files (all or nothing)."""


def _run_import(fmt: str, path: str, update: bool, verbose: bool) -> None:
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
        report = import_file(s.library, fmt, path, update=update, progress=progress)
    if s.format == "json":
        show.emit_json(report)
    else:
        click.echo(
            f"added {report.added}, updated {report.updated}, skipped {report.skipped}, "
            f"invalid {report.invalid}",
            err=True,
        )
    if verbose:
        for line in report.problems:
            click.echo(f"  {line}", err=True)


def _import_command(fmt: str, summary: str):
    @import_.command(name=fmt, help=summary)
    @click.argument("path", type=click.Path(dir_okay=False, allow_dash=True))
    @click.option(
        "--update",
        is_flag=True,
        help="Merge into bookmarks that exist (tags, earliest added, most visits).",
    )
    @click.option("--verbose", "-v", is_flag=True, help="List skipped and invalid entries.")
    def command(path: str, update: bool, verbose: bool) -> None:
        _run_import(fmt, path, update, verbose)

    return command


_import_command("html", "A browser's exported HTML (Netscape format); folders become tags.")
_import_command("json", "A JSON array of bookmarks (as `export json` writes).")
_import_command("csv", "CSV with a header row (url, title, tags, ... in common spellings).")
_import_command("text", "Plain text, one URL per line.")
add_browser_imports(import_)


@click.group(cls=Group)
@global_options
def export() -> None:
    """Export every bookmark to a file or stdout."""


def _write(fmt: str, target: str | None, **options) -> None:
    from marks.transfer import export as run_export

    library = state().library
    if target in (None, "-"):
        count = run_export(library, fmt, sys.stdout, **options)
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


def _export_command(fmt: str, summary: str, hierarchical: bool = False):
    def command(output_file: str | None, **options) -> None:
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
