"""`marks snapshot take|list|view|export|delete|prune`: thin commands over `marks.snapshots`."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from marks.cli import Group, confirm, global_options, state
from marks.cli import output as show

if TYPE_CHECKING:  # imported lazily at run time
    from marks.snapshots.service import Snapshots
    from marks.wire import Snapshot, SnapshotResult


@click.group(cls=Group)
@global_options
def snapshot() -> None:
    """Keep self-contained copies of pages (styles, images, fonts inlined; scripts removed)."""


def _line(item: "SnapshotResult") -> str:
    sid = f"#{item.snapshot.id} {item.snapshot.size} B" if item.snapshot else ""
    return f"{item.outcome:<10} {item.bookmark_id:>7}  {item.url}  {sid}  {item.detail}".rstrip()


def _row(item: "Snapshot") -> dict:
    return {
        "id": item.id,
        "bookmark": item.bookmark_id,
        "taken": show.when(item.taken_at),
        "source": item.source,
        "size": item.size,
        "left_out": len(item.omitted),
        "url": item.url,
    }


def service() -> "Snapshots":
    """The snapshot service with the config's web rules and cap."""
    from marks.health import options_from_config
    from marks.snapshots.service import Snapshots

    s = state()
    return Snapshots(s.library, options_from_config(s.config), s.config["snapshot_max_mb"])


@snapshot.command()
@click.argument("ids", nargs=-1, type=int)
@click.option("--query", "expression", metavar="EXPR", help="Bookmarks matching a filter.")
@click.option("--missing", is_flag=True, help="Only bookmarks without a snapshot yet.")
@click.option("--verbose", "-v", is_flag=True, help="Every page, and every resource left out.")
def take(ids: tuple[int, ...], expression: str | None, missing: bool, verbose: bool) -> None:
    """Fetch pages and keep each as one self-contained HTML file (at most snapshot_max_mb)."""
    from marks.filters import compile_filter
    from marks.snapshots.service import TakeSummary

    s = state()
    where, bindings = compile_filter(expression) if expression else ("", [])
    snapshots = service()
    total, skipped = snapshots.plan(ids, where, bindings, missing)
    results: list[SnapshotResult] = list(skipped)
    failures: list[SnapshotResult] = []
    bar = None
    if s.format == "table" and not verbose and sys.stderr.isatty() and total:
        bar = click.progressbar(length=total, label="snapshotting", file=sys.stderr, width=30)
        bar.__enter__()

    def report(item: "SnapshotResult") -> None:
        click.echo(_line(item))
        if verbose and item.snapshot:
            for left in item.snapshot.omitted:
                click.echo(f"    left out {left.url}: {left.reason}")

    def on_result(item: "SnapshotResult") -> None:
        if s.format == "json":
            results.append(item)
        elif verbose or s.format != "table":
            report(item)
        elif item.outcome != "stored":
            failures.append(item)  # shown after the progress bar
        if bar is not None:
            bar.update(1)

    if s.format != "json":
        for item in skipped:
            report(item)
    summary = TakeSummary()
    try:
        snapshots.take(on_result=on_result, summary=summary)
    except KeyboardInterrupt:
        done = sum(summary.by_outcome.values())
        click.echo(f"\nmarks: interrupted after {done} of {total} page(s) (kept)", err=True)
        raise click.exceptions.Exit(130) from None
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
        for item in failures:
            report(item)
    if s.format == "json":
        show.emit_json(results)
    counts = dict(summary.by_outcome)
    if skipped:
        counts["skipped"] = len(skipped)
    text = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    click.echo(
        f"{total} page(s) in {summary.seconds:.1f} s: {text or 'nothing to do'}",
        err=s.format != "table",
    )


@snapshot.command(name="list")
@click.argument("ids", nargs=-1, type=int)
def list_(ids: tuple[int, ...]) -> None:
    """Snapshots of these bookmarks (all when none are named), newest first."""
    found = service().list(ids)
    if state().format == "json":
        show.emit_json(found)
        return
    show.records([_row(item) for item in found], state().format)
    if not found:
        click.echo("no snapshots", err=True)


@snapshot.command()
@click.argument("snapshot_id", metavar="SID", type=int)
def view(snapshot_id: int) -> None:
    """Print a snapshot's readable text."""
    snapshots = service()
    text = snapshots.text(snapshot_id)
    if state().format == "json":
        show.emit_json({"snapshot": snapshots.get(snapshot_id), "text": text})
        return
    click.echo(text)


@snapshot.command()
@click.argument("snapshot_id", metavar="SID", type=int)
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
def export(snapshot_id: int, path: Path) -> None:
    """Write a snapshot's self-contained HTML to FILE."""
    size = service().export(snapshot_id, path)
    click.echo(f"wrote {size} bytes to {path}", err=True)


@snapshot.command()
@click.argument("snapshot_ids", metavar="SID...", nargs=-1, type=int, required=True)
def delete(snapshot_ids: tuple[int, ...]) -> None:
    """Delete snapshots."""
    if len(snapshot_ids) > 1:
        confirm(f"Delete {len(snapshot_ids)} snapshots?")
    click.echo(f"deleted {service().delete(snapshot_ids)} snapshot(s)", err=True)


@snapshot.command()
@click.option("--keep", type=click.IntRange(0), required=True, help="Newest N per bookmark kept.")
def prune(keep: int) -> None:
    """Delete all but the newest N snapshots of each bookmark."""
    confirm(f"Delete all but the newest {keep} snapshot(s) of each bookmark?")
    click.echo(f"deleted {service().prune(keep)} snapshot(s)", err=True)
