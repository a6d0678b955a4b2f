"""`marks queue ...`: the reading queue (thin commands over `marks.queue`).

Numbers are read as arguments even when negative (`queue progress 3 -5`), so an out-of-range value
is the service's one-line error (exit 1), never a confusing "no such option".
"""

from typing import TYPE_CHECKING

import click
import msgspec

from marks.cli import Group, global_options, state
from marks.cli import output as show
from marks.printable import escape
from marks.wire import QueueItem

if TYPE_CHECKING:  # imported lazily at run time
    from marks.queue import ReadingQueue


NUMBERS = {"ignore_unknown_options": True}


@click.group(cls=Group)
@global_options
def queue() -> None:
    """Keep a reading queue: priorities 1 (highest) to 5, progress 0 to 100."""


def _queue() -> "ReadingQueue":
    from marks.queue import ReadingQueue

    return ReadingQueue(state().library.store, now=state().library.now)


def _rows(items: list[QueueItem]) -> list[dict]:
    return [
        {
            "id": item.id,
            "priority": item.priority,
            "progress": item.progress,
            "title": item.title,
            "url": item.url,
            "queued_at": show.when(item.queued_at),
            "completed_at": show.when(item.completed_at),
        }
        for item in items
    ]


def _show(items: list[QueueItem]) -> None:
    fmt = state().format
    if fmt == "json":
        show.emit_json(items)
    elif fmt == "urls":
        for item in items:
            click.echo(escape(item.url))
    else:
        show.records(_rows(items), fmt)


@queue.command(name="list")
@click.option("--all", "everything", is_flag=True, help="Include completed items.")
def list_(everything: bool) -> None:
    """The queue in reading order (the next item first)."""
    items = _queue().items(include_completed=everything)
    if not items and state().format in ("table", "plain"):
        click.echo("the reading queue is empty", err=True)
        return
    _show(items)


@queue.command(context_settings=NUMBERS)
@click.argument("ids", nargs=-1, type=int, required=True)
@click.option("--priority", "-p", type=int, default=3, show_default=True, help="1 (highest) to 5.")
def add(ids: tuple[int, ...], priority: int) -> None:
    """Put bookmarks in the queue."""
    items = _queue().add(ids, priority=priority)
    _show(items)


@queue.command(context_settings=NUMBERS)
@click.argument("ids", nargs=-1, type=int, required=True)
def remove(ids: tuple[int, ...]) -> None:
    """Take bookmarks out of the queue (completed ones too)."""
    count = _queue().remove(ids)
    click.echo(f"removed {count} from the reading queue", err=True)


@queue.command(context_settings=NUMBERS)
@click.argument("bookmark_id", type=int)
@click.argument("percent", type=int)
def progress(bookmark_id: int, percent: int) -> None:
    """Set how far you have read (0 to 100; 100 completes the item)."""
    _show([_queue().set_progress(bookmark_id, percent)])


@queue.command(context_settings=NUMBERS)
@click.argument("bookmark_id", type=int)
@click.argument("level", type=int)
def priority(bookmark_id: int, level: int) -> None:
    """Set an item's priority (1 is highest, 5 lowest)."""
    _show([_queue().set_priority(bookmark_id, level)])


@queue.command(name="next")
def next_() -> None:
    """The item to read next."""
    item = _queue().next()
    if item is None:
        if state().format == "json":
            show.emit_json(None)
        else:
            click.echo("the reading queue is empty", err=True)
        return
    _show([item])


@queue.command()
def stats() -> None:
    """Queued, in progress, completed, by priority, and the oldest item."""
    summary = _queue().stats()
    if state().format == "json":
        show.emit_json(summary)
        return
    if state().format == "csv":
        show.records([msgspec.to_builtins(summary) | {"oldest": _oldest(summary.oldest)}], "csv")
        return
    click.echo(f"     queued: {summary.queued}")
    click.echo(f"in progress: {summary.in_progress}")
    click.echo(f"  completed: {summary.completed}")
    levels = ", ".join(f"{level}: {count}" for level, count in summary.by_priority.items())
    click.echo(f"by priority: {levels}")
    click.echo(f"     oldest: {_oldest(summary.oldest) or '-'}")


def _oldest(item: QueueItem | None) -> str:
    if item is None:
        return ""
    return f"{item.id} {item.title or item.url} (queued {show.when(item.queued_at)})"
