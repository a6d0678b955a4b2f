"""`marks trash ...` and `marks undo`: deleted bookmarks wait in the trash; undo reverses the
last destructive change. Thin commands over `marks.trash`."""

import click

from marks.cli import Command, Group, confirm, global_options, state
from marks.cli import output as show


@click.group(cls=Group)
@global_options
def trash() -> None:
    """Deleted bookmarks: list, restore, empty (kept `trash_days` days, 30 by default)."""


@trash.command(name="list")
def list_() -> None:
    """What is in the trash, newest first."""
    from marks import trash as service

    found = service.entries(state().library)
    if state().format == "json":
        show.emit_json(found)
        return
    if state().format == "urls":
        for entry in found:
            click.echo(entry.url)
        return
    show.records(
        [
            {
                "id": e.id,
                "deleted": show.when(e.deleted_at),
                "title": e.title,
                "url": e.url,
                "rows": e.rows,
            }
            for e in found
        ],
        state().format,
    )
    if not found and state().format == "table":
        click.echo("the trash is empty", err=True)


@trash.command()
@click.argument("ids", nargs=-1, type=int, required=True)
def restore(ids: tuple[int, ...]) -> None:
    """Put bookmarks back, with their tags, queue entry, checks and pages."""
    from marks import trash as service

    restored = service.restore(state().library, ids)
    _restored(restored)


def _restored(restored: list) -> None:
    from marks import trash as service

    if state().format == "json":
        show.emit_json(restored)
    for item in restored:
        note = service.describe(item)
        if note:
            click.echo(f"marks: {note}", err=True)
    click.echo(f"restored {len(restored)} bookmark(s)", err=True)


@trash.command()
@click.option(
    "--older-than",
    type=click.IntRange(0, 100_000),
    metavar="DAYS",
    help="Only what was deleted more than DAYS days ago.",
)
def empty(older_than: int | None) -> None:
    """Forget what is in the trash for good (asks first)."""
    from marks import trash as service

    library = state().library
    what = f"deleted more than {older_than} day(s) ago" if older_than is not None else "all"
    confirm(f"Empty the trash ({what})? This cannot be undone.")
    click.echo(f"removed {service.empty(library, older_than)} bookmark(s) for good", err=True)


@click.command(cls=Command)
@global_options
def undo() -> None:
    """Undo the last destructive change: delete, tag rename/merge/delete, bulk tags, dedupe,
    edit. Says what it put back; run it again for the change before."""
    from marks import trash as service

    report = service.undo(state().library)
    if state().format == "json":
        show.emit_json(report)
    for note in report.notes:
        click.echo(f"marks: {note}", err=True)
    click.echo(report.message, err=True)
