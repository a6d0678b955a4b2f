"""`marks bookmark ...`: thin commands over `marks.library`."""

from typing import TYPE_CHECKING

import click

from marks.cli import Group, WordsCommand, confirm, global_options, state
from marks.cli import output as show
from marks.printable import escape

if TYPE_CHECKING:  # imported lazily at run time
    from marks.wire import Bookmark, SnapshotResult

GRANULARITY = {"year": 4, "month": 7, "day": 10}


@click.group(cls=Group, lazy={"health": "marks.cli.health:health"})  # the checker's many options
@global_options
def bookmark() -> None:
    """Add, list, search, edit and visit bookmarks."""


def _tags(values: tuple[str, ...]) -> list[str]:
    return [tag for value in values for tag in value.split(",") if tag.strip()]


@bookmark.command()
@click.argument("url")
@click.option("--title", "-t", default="", help="Title.")
@click.option("--description", "-d", default="", help="Description or notes.")
@click.option("--tags", multiple=True, help="Tags (comma-separated, or repeat the option).")
@click.option("--tag", "tag_alias", multiple=True, hidden=True)  # the spelling before 0.8
@click.option("--stars", is_flag=True, help="Star it.")
@click.option("--star", "star_alias", is_flag=True, hidden=True)  # the spelling before 0.8
@click.option("--archived", is_flag=True, help="Mark it archived.")
@click.option("--no-fetch", is_flag=True, help="Without --title: do not fetch the page's title.")
def add(
    url: str,
    title: str,
    description: str,
    tags: tuple[str, ...],
    tag_alias: tuple[str, ...],
    stars: bool,
    star_alias: bool,
    archived: bool,
    no_fetch: bool,
) -> None:
    """Add a bookmark (without --title, the page's title and description are fetched)."""
    s = state()
    added = s.library.add(
        url,
        title=title,
        description=description,
        tags=_tags((*tags, *tag_alias)),
        starred=stars or star_alias,
        archived=archived,
    )
    if s.config["snapshot_on_add"] and not no_fetch:
        added = _snapshot_on_add(added.id)
    elif not title and not no_fetch and s.config["fetch_on_add"]:
        from marks import pagemeta

        enriched = pagemeta.enrich(s.library, added)
        added = enriched.bookmark
        if enriched.note:
            click.echo(f"marks: {escape(enriched.note)}", err=True)
    show.bookmark_detail(added, s.format)


def _snapshot_on_add(bookmark_id: int) -> "Bookmark":
    """Config `snapshot_on_add`: one fetch keeps the page, its snapshot, and fills an empty
    title and description from it (as content does)."""
    from marks.cli.snapshot import service

    s = state()
    snapshots = service()
    total, skipped = snapshots.plan([bookmark_id])
    outcomes: list[SnapshotResult] = [*skipped]
    if total:
        snapshots.take(on_result=outcomes.append)
    for item in outcomes:
        if item.outcome == "stored" and item.snapshot is not None:
            click.echo(f"marks: snapshot {item.snapshot.id} taken", err=True)
        else:
            click.echo(f"marks: no snapshot ({item.outcome}): {item.detail}", err=True)
    return s.library.get(bookmark_id)


@bookmark.command(name="list")
@click.option(
    "--sort",
    type=click.Choice(["added", "visited", "title", "url", "visits", "id"]),
    default=None,
    help="Order [added, newest first].",
)
@click.option("--reverse", is_flag=True, help="Reverse the order.")
@click.option("--limit", "-n", type=click.IntRange(0), default=None, help="At most N.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip the first N.")
@click.option(
    "--filter-tags", multiple=True, help="Only bookmarks with this tag or its subtags (repeatable)."
)
@click.option("--tag", "tag_alias", multiple=True, hidden=True)  # the spelling before 0.8
@click.option("--starred", is_flag=True, default=None, help="Only starred bookmarks.")
@click.option(
    "--by-date",
    type=click.Choice(["added", "visited"]),
    help="Group by the date a bookmark was added or last visited.",
)
@click.option(
    "--date-granularity",
    type=click.Choice(list(GRANULARITY)),
    default="month",
    show_default=True,
    help="Group size for --by-date.",
)
def list_(
    sort: str | None,
    reverse: bool,
    limit: int | None,
    offset: int,
    filter_tags: tuple[str, ...],
    tag_alias: tuple[str, ...],
    starred: bool | None,
    by_date: str | None,
    date_granularity: str,
) -> None:
    """List bookmarks."""
    s = state()
    limit = limit if limit is not None else (s.config["list_limit"] or None)
    if by_date and sort is None:
        sort = "visited" if by_date == "visited" else "added"
    items = s.library.list_bookmarks(
        sort=sort or "added",
        reverse=reverse,
        limit=limit,
        offset=offset,
        tags=_tags((*filter_tags, *tag_alias)),
        starred=starred or None,
    )
    if not by_date:
        show.bookmarks(items, s.format)
        return
    field = "last_visited" if by_date == "visited" else "added"
    items = [b for b in items if getattr(b, field) is not None]
    size = GRANULARITY[date_granularity]
    periods = [show.when(getattr(b, field))[:size] for b in items]
    if s.format == "json":
        groups: dict[str, list] = {}
        for period, b in zip(periods, items, strict=True):
            groups.setdefault(period, []).append(b)
        show.emit_json([{"period": period, "bookmarks": group} for period, group in groups.items()])
    elif s.format == "csv":  # one CSV, the period its first column
        show.bookmarks(items, "csv", first=("period", periods))
    elif s.format == "urls":  # URLs only, as the format promises
        show.bookmarks(items, "urls")
    else:
        current = None
        for period, b in zip(periods, items, strict=True):
            if period != current:
                current = period
                click.echo(f"\n== {period} ==" if s.format == "table" else f"# {period}")
            show.bookmarks([b], "plain")


@bookmark.command(cls=WordsCommand)
@click.argument("query", nargs=-1, required=True)
@click.option(
    "--fts",
    is_flag=True,
    default=None,
    help='Ranked full-text search (stemming, prefix*, "phrases", AND/OR/NOT, title:, url:, #tag).',
)
@click.option("--limit", "-n", type=click.IntRange(1), default=None, help="At most N results.")
def search(query: tuple[str, ...], fts: bool | None, limit: int | None) -> None:
    """Search bookmarks (substring match unless --fts)."""
    s = state()
    use_fts = fts if fts is not None else s.config["search_fts"]
    hits = s.library.search(" ".join(query), fts=use_fts, limit=limit or s.config["search_limit"])
    if hits.fallback:  # no FTS5 here: said once, on stderr, so JSON output stays JSON
        click.echo(f"marks: {hits.fallback}", err=True)
    show.bookmarks(hits, s.format)


@bookmark.command()
@click.argument("ids", nargs=-1, type=int, required=True)
def get(ids: tuple[int, ...]) -> None:
    """Show bookmarks in full."""
    s = state()
    found = s.library.get_many(ids)
    if s.format in ("table", "plain"):
        for number, item in enumerate(found):
            if number:
                click.echo()
            show.bookmark_detail(item, s.format)
    else:
        show.bookmarks(found, s.format)


@bookmark.command()
@click.argument("bookmark_id", type=int)
@click.option("--url", help="New URL.")
@click.option("--title", "-t", help="New title.")
@click.option("--description", "-d", help="New description.")
@click.option("--tags", help="Replace all tags (comma-separated; empty removes all).")
@click.option("--add-tag", multiple=True, help="Add a tag.")
@click.option("--remove-tag", multiple=True, help="Remove a tag.")
@click.option("--stars/--no-stars", default=None, help="Star or unstar.")
@click.option("--star/--no-star", "star_alias", default=None, hidden=True)  # before 0.8
@click.option("--archived/--no-archived", default=None, help="Archive or unarchive.")
def update(
    bookmark_id: int,
    url: str | None,
    title: str | None,
    description: str | None,
    tags: str | None,
    add_tag: tuple[str, ...],
    remove_tag: tuple[str, ...],
    stars: bool | None,
    star_alias: bool | None,
    archived: bool | None,
) -> None:
    """Change a bookmark."""
    library = state().library
    stars = stars if stars is not None else star_alias
    changes: dict[str, object] = {
        name: value
        for name, value in (
            ("url", url),
            ("title", title),
            ("description", description),
            ("starred", stars),
            ("archived", archived),
        )
        if value is not None
    }
    if tags is not None or add_tag or remove_tag:
        current = library.get(bookmark_id).tags if tags is None else _tags((tags,))
        removed = {tag.casefold() for tag in _tags(remove_tag)}
        changes["tags"] = [t for t in current if t.casefold() not in removed] + _tags(add_tag)
    if not changes:
        raise click.UsageError("nothing to change (see --help)")
    show.bookmark_detail(library.update(bookmark_id, **changes), state().format)


@bookmark.command()
@click.argument("ids", nargs=-1, type=int, required=True)
def delete(ids: tuple[int, ...]) -> None:
    """Delete bookmarks (asks first): they wait in the trash (`marks trash`, `marks undo`)."""
    library = state().library
    found = library.get_many(ids)
    names = ", ".join(f"{b.id} ({b.title or b.url})" for b in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    confirm(f"Delete {len(found)} bookmark(s): {names}{more}?")
    deleted = library.delete(ids)
    click.echo(
        f"deleted {deleted} bookmark(s) (kept in the trash: `marks undo` brings them back)",
        err=True,
    )


@bookmark.command(cls=WordsCommand)
@click.argument("expression", nargs=-1, required=True)
@click.option(
    "--sort",
    type=click.Choice(["added", "visited", "title", "url", "visits", "id"]),
    default="added",
    show_default=True,
)
@click.option("--limit", "-n", type=click.IntRange(1), default=None)
def query(expression: tuple[str, ...], sort: str, limit: int | None) -> None:
    """Filter with a small query language, e.g. 'visits > 3 and tag:python and added >= 2024'.

    Fields: id, url, title, description, domain, visits, added, visited; operators
    = != < <= > >= ~ (contains); flags starred, archived, unread, visited, broken, reachable,
    unchecked, untagged; tag:NAME, domain:NAME; and, or, not, parentheses.
    """
    from marks.filters import compile_filter

    where, bindings = compile_filter(" ".join(expression))
    show.bookmarks(
        state().library.list_bookmarks(sort=sort, limit=limit, where=where, bindings=bindings),
        state().format,
    )


@bookmark.command()
@click.argument("bookmark_id", type=int)
@click.option("--open", "open_it", is_flag=True, help="Also open it in the web browser.")
def visit(bookmark_id: int, open_it: bool) -> None:
    """Record a visit (visit count and time)."""
    visited = state().library.visit(bookmark_id)
    if open_it:
        import webbrowser

        webbrowser.open(visited.url)
    show.bookmark_detail(visited, state().format)
