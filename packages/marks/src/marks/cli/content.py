"""`marks content refresh|view|auto-tag`: thin commands over `marks.content` and `marks.autotag`."""

import sys
from typing import TYPE_CHECKING

import click

from marks.cli import Group, confirm, global_options, state
from marks.cli import output as show
from marks.printable import escape

if TYPE_CHECKING:  # imported lazily at run time
    from marks.wire import PageContent


@click.group(cls=Group)
@global_options
def content() -> None:
    """Fetch and keep pages' text (searchable), view it, suggest tags from it."""


def _line(item: "PageContent") -> str:
    status = "" if item.status is None else str(item.status)
    about = item.detail or (f"{item.kind}, {item.words} words" if item.outcome == "stored" else "")
    title = f"  {item.title}" if item.title else ""
    return escape(f"{item.outcome:<10} {status:>3} {item.id:>7}  {item.url}  {about}{title}")


@content.command()
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Every http(s) bookmark.")
@click.option("--query", "expression", metavar="EXPR", help="Bookmarks matching a filter.")
@click.option("--force", is_flag=True, help="Download even pages the server says are unchanged.")
@click.option("--verbose", "-v", is_flag=True, help="Print every page.")
@click.option("--concurrency", type=click.IntRange(1, 1000), default=None, help="Pages at once.")
@click.option("--timeout", type=click.FloatRange(0.01, 600), default=None, help="Seconds a page.")
def refresh(
    ids: tuple[int, ...],
    everything: bool,
    expression: str | None,
    force: bool,
    verbose: bool,
    concurrency: int | None,
    timeout: float | None,
) -> None:
    """Fetch pages and store their original and readable text (HTML, PDF; at most 5 MiB)."""
    from marks import content as service
    from marks.filters import compile_filter
    from marks.health import options_from_config

    s = state()
    where, bindings = compile_filter(expression) if expression else ("", [])
    options = options_from_config(s.config, concurrency=concurrency, timeout=timeout)
    pages = service.Content(s.library, options)
    total = pages.plan(ids, everything, where, bindings)
    results: list[PageContent] = []
    failures: list[PageContent] = []
    bar = None
    if s.format == "table" and not verbose and sys.stderr.isatty() and total:
        bar = click.progressbar(length=total, label="fetching", file=sys.stderr, width=30)
        bar.__enter__()

    def on_result(item: "PageContent") -> None:
        if s.format == "json":
            results.append(item)
        elif verbose or s.format != "table":
            click.echo(_line(item))
        elif item.outcome in ("failed", "too_large"):
            failures.append(item)  # shown after the progress bar
        if bar is not None:
            bar.update(1)

    summary = service.RefreshSummary()
    try:
        pages.refresh(force=force, on_result=on_result, summary=summary)
    except KeyboardInterrupt:
        done = sum(summary.by_outcome.values())
        click.echo(f"\nmarks: interrupted after {done} of {total} page(s) (kept)", err=True)
        raise click.exceptions.Exit(130) from None
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
        for item in failures:
            click.echo(_line(item))
    if s.format == "json":
        show.emit_json(results)
    counts = ", ".join(f"{name} {count}" for name, count in sorted(summary.by_outcome.items()))
    click.echo(
        f"{total} page(s) in {summary.seconds:.1f} s: {counts or 'nothing to do'}",
        err=s.format != "table",
    )


@content.command()
@click.argument("bookmark_id", type=int)
@click.option("--raw", is_flag=True, help="The original HTML instead of the text.")
def view(bookmark_id: int, raw: bool) -> None:
    """Print a page's stored text (or its original HTML)."""
    from marks.content import Content

    s = state()
    pages = Content(s.library)
    text = pages.view(bookmark_id, raw)
    if s.format == "json":
        stored = pages.stored(bookmark_id)
        show.emit_json({"id": bookmark_id, "meta": stored, ("html" if raw else "text"): text})
        return
    click.echo(escape(text, keep="\n\t"))  # a page's text: shown, never obeyed


@content.command(name="auto-tag")
@click.argument("ids", nargs=-1, type=int)
@click.option("--all", "everything", is_flag=True, help="Every bookmark.")
@click.option("--apply", "apply_them", is_flag=True, help="Add the suggested tags (asks first).")
@click.option(
    "--min-score",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="Only suggestions scoring at least this (0..1).",
)
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(1, 20),
    default=3,
    show_default=True,
    help="Suggestions per bookmark.",
)
def auto_tag(
    ids: tuple[int, ...], everything: bool, apply_them: bool, min_score: float, limit: int
) -> None:
    """Suggest tags with every enabled tag_suggester plugin (the built-in `keywords` included)."""
    from marks import autotag
    from marks import content as service

    s = state()
    if everything == bool(ids):
        raise click.UsageError("say which bookmarks: IDS or --all (not both)")
    chosen = list(ids) if ids else s.library.select_ids(all_bookmarks=True)
    pages = service.Content(s.library)
    suggestions = autotag.suggest(
        s.library, s.plugins, chosen, min_score=min_score, limit=limit, text_of=pages.text
    )
    rows = [
        {"id": item.id, "tag": item.tag, "score": round(item.score, 3), "by": ", ".join(item.by)}
        for item in suggestions
    ]
    if s.format == "json":
        show.emit_json(suggestions)
    else:
        show.records(rows, s.format)
    if not rows:
        click.echo("no suggestions", err=True)
        return
    if not apply_them:
        return
    bookmarks = {item.id for item in suggestions}
    if len(bookmarks) > 1:
        confirm(f"Add {len(rows)} tag(s) to {len(bookmarks)} bookmark(s)?")
    added = autotag.apply(s.library, suggestions)
    click.echo(f"added {added} tag(s) to {len(bookmarks)} bookmark(s)", err=True)
