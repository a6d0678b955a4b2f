"""`marks tag ...`: hierarchical tags (`a/b`), counts include descendants."""

from collections.abc import Iterable
from typing import TYPE_CHECKING

import click

from marks.cli import Group, confirm, global_options, state
from marks.cli import output as show
from marks.printable import escape

if TYPE_CHECKING:
    from marks.wire import TagCount


@click.group(cls=Group)
@global_options
def tag() -> None:
    """List, tree, rename, add and remove tags."""


def _selection(
    ids: Iterable[int],
    all_bookmarks: bool = False,
    starred: bool = False,
    filter_tags: Iterable[str] = (),
) -> list[int]:
    chosen = state().library.select_ids(
        ids=ids, all_bookmarks=all_bookmarks, starred=starred, filter_tags=filter_tags
    )
    if not chosen:
        raise click.UsageError(
            "no bookmarks selected (give ids, --all, --starred or --filter-tags)"
        )
    return chosen


def _report(done: str, name: str, added: int, had: int) -> None:
    """Say what changed (`done`), and apart the bookmarks that already had the tag."""
    if added == 0:
        message = f"nothing changed: {had} bookmark(s) already had {name!r}"
    else:
        message = done + (f", {had} already had it" if had else "")
    click.echo(message, err=True)


@tag.command(name="list")
def list_() -> None:
    """Every tag with its bookmark count (descendants included)."""
    counts = state().library.tag_counts()
    show.records(
        [{"tag": c.name, "count": c.count, "direct": c.direct} for c in counts], state().format
    )


@tag.command()
def tree() -> None:
    """Tags as a tree."""
    counts = state().library.tag_counts()
    if state().format == "json":
        show.emit_json(_nested(counts))
        return
    if state().format in ("csv", "plain", "urls"):  # for programs: one row per node, full path
        show.records(
            [{"tag": c.name, "count": c.count, "direct": c.direct} for c in counts],
            state().format,
        )
        return
    for item in counts:
        depth = item.name.count("/")
        click.echo(f"{'  ' * depth}{escape(item.name.rsplit('/', 1)[-1])} ({item.count})")


def _nested(counts: "list[TagCount]") -> list[dict]:
    roots: list[dict] = []
    nodes: dict[str, dict] = {}
    for item in counts:
        node = {
            "name": item.name.rsplit("/", 1)[-1],
            "path": item.name,
            "count": item.count,
            "children": [],
        }
        nodes[item.name.casefold()] = node
        parent = item.name.rpartition("/")[0].casefold()
        (nodes[parent]["children"] if parent in nodes else roots).append(node)
    return roots


@tag.command()
def stats() -> None:
    """How tags are used."""
    summary = state().library.tag_stats()
    if state().format == "json":
        show.emit_json(summary)
        return
    for key in ("tags", "tree_nodes", "bookmarks", "untagged", "deepest"):
        click.echo(f"{key.replace('_', ' '):>11}: {getattr(summary, key)}")
    if summary.most_used:
        click.echo(
            "  most used: "
            + ", ".join(f"{escape(u.tag)} ({u.bookmarks})" for u in summary.most_used)
        )


@tag.command()
@click.argument("name")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "all_bookmarks", is_flag=True, help="Every bookmark.")
@click.option("--starred", is_flag=True, help="Every starred bookmark.")
@click.option("--filter-tags", multiple=True, help="Bookmarks with this tag (repeatable).")
def add(
    name: str,
    ids: tuple[int, ...],
    all_bookmarks: bool,
    starred: bool,
    filter_tags: tuple[str, ...],
) -> None:
    """Add tag NAME to bookmarks."""
    chosen = _selection(ids, all_bookmarks, starred, filter_tags)
    if len(chosen) > 1 and (all_bookmarks or starred or filter_tags):
        confirm(f"Add tag {name!r} to {len(chosen)} bookmarks?")
    added = state().library.tag_add(name, chosen)
    _report(f"tagged {added} bookmark(s) with {name!r}", name, added, len(chosen) - added)


@tag.command()
@click.argument("name")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "all_bookmarks", is_flag=True, help="Every bookmark.")
@click.option("--filter-tags", multiple=True, help="Bookmarks with this tag (repeatable).")
def remove(
    name: str, ids: tuple[int, ...], all_bookmarks: bool, filter_tags: tuple[str, ...]
) -> None:
    """Remove tag NAME from bookmarks."""
    chosen = _selection(ids, all_bookmarks, False, filter_tags)
    if len(chosen) > 1 and (all_bookmarks or filter_tags):
        confirm(f"Remove tag {name!r} from {len(chosen)} bookmarks?")
    removed = state().library.tag_remove(name, chosen)
    click.echo(f"removed {name!r} from {removed} bookmark(s)", err=True)


@tag.command()
@click.argument("old")
@click.argument("new")
def rename(old: str, new: str) -> None:
    """Rename a tag and its descendants (asks first; merges into existing tags)."""
    library = state().library
    old_name, new_name, affected = library.rename_preview(old, new)
    confirm(f"Rename {old_name!r} to {new_name!r} (with its subtags) on {affected} bookmark(s)?")
    library.tag_rename(old_name, new_name)
    click.echo(f"renamed {old_name!r} to {new_name!r} on {affected} bookmark(s)", err=True)


@tag.command()
@click.argument("name")
@click.option("--to-ids", help="Comma-separated bookmark ids.")
@click.option("--starred", is_flag=True, help="Every starred bookmark.")
@click.option("--filter-tags", multiple=True, help="Bookmarks with this tag (repeatable).")
def copy(name: str, to_ids: str | None, starred: bool, filter_tags: tuple[str, ...]) -> None:
    """Copy an existing tag onto other bookmarks."""
    try:
        ids = [int(part) for part in (to_ids or "").split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("ids are whole numbers", param_hint="--to-ids") from None
    chosen = _selection(ids, False, starred, filter_tags)
    if len(chosen) > 1:
        confirm(f"Copy tag {name!r} to {len(chosen)} bookmarks?")
    added = state().library.tag_copy(name, chosen)
    _report(f"copied {name!r} to {added} bookmark(s)", name, added, len(chosen) - added)


@tag.command(name="filter")
@click.argument("names", nargs=-1, required=True)
@click.option("--any", "any_tag", is_flag=True, help="Any of the tags instead of all.")
def filter_(names: tuple[str, ...], any_tag: bool) -> None:
    """Bookmarks with all (or --any) of the tags (descendants included)."""
    show.bookmarks(state().library.with_tags(names, any_tag=any_tag), state().format)
