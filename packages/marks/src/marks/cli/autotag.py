"""`marks content auto-tag`: tags suggested by every enabled tag_suggester plugin."""

import click

from marks.cli import confirm, global_options, state
from marks.cli import output as show


@click.command(name="auto-tag")
@global_options
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Every bookmark.")
@click.option("--apply", "apply_", is_flag=True, help="Add the suggested tags (asks first).")
@click.option(
    "--min-score",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="Leave out weaker suggestions (0 to 1).",
)
def auto_tag(ids: tuple[int, ...], everything: bool, apply_: bool, min_score: float) -> None:
    """Suggest tags for bookmarks; with --apply, add them."""
    from marks import autotag

    library = state().library
    if everything == bool(ids):
        raise click.UsageError("give bookmark ids or --all (not both)")
    chosen = list(ids) if ids else library.select_ids(all_bookmarks=True)
    found = autotag.suggest(library, state().plugins, chosen, min_score=min_score)
    fmt = state().format
    if fmt == "json":
        show.emit_json(found)
    elif found:
        rows = [
            {"id": s.id, "tag": s.tag, "score": f"{s.score:.2f}", "by": ", ".join(s.by)}
            for s in found
        ]
        show.records(rows, fmt)
    if not found:
        click.echo("no suggestions", err=True)
        return
    if apply_:
        if len({s.id for s in found}) > 1:
            confirm(f"add {len(found)} tags to {len({s.id for s in found})} bookmarks?")
        added = autotag.apply(library, found)
        click.echo(f"added {added} tags", err=True)
