"""`marks graph build|neighbors|stats|export`."""

import os
import sys
import tempfile

import click

from marks.cli import Group, global_options, state
from marks.cli import output as show


@click.group(cls=Group)
@global_options
def graph() -> None:
    """Build the bookmark graph; neighbours, stats, export."""


@graph.command()
def build() -> None:
    """Compute the edges (shared tags, same site, links in cached pages) and store them."""
    from marks.graph.build import build as run

    report = run(state().library.store)
    if state().format == "json":
        show.emit_json(report)
    else:
        click.echo(
            f"graph built: {report.nodes} bookmarks, {report.edges} edges "
            f"in {report.seconds:.2f} s",
            err=True,
        )


@graph.command()
@click.argument("bookmark_id", metavar="ID", type=int)
@click.option("--limit", "-n", type=click.IntRange(1), default=10, show_default=True)
def neighbors(bookmark_id: int, limit: int) -> None:
    """The bookmarks closest to ID, with the weight and why."""
    from marks.graph.query import neighbours

    found = neighbours(state().library.store, bookmark_id, limit)
    fmt = state().format
    if fmt == "json":
        show.emit_json(found)
    elif fmt == "urls":
        for n in found:
            click.echo(n.url)
    else:
        show.records(
            [
                {"id": n.id, "weight": f"{n.weight:.3f}", "title": n.title or n.url, "why": n.why}
                for n in found
            ],
            fmt,
        )
        if not found and fmt == "table":
            click.echo(f"bookmark {bookmark_id} has no neighbours", err=True)


@graph.command()
def stats() -> None:
    """Nodes, edges, components, density and the most connected bookmarks."""
    from marks.graph.query import stats as run

    result = run(state().library.store)
    fmt = state().format
    if fmt == "json":
        show.emit_json(result)
        return
    for name in ("nodes", "edges", "components", "isolated", "largest_component", "density"):
        click.echo(f"{name.replace('_', ' '):>17}: {getattr(result, name)}")
    click.echo(f"{'built at':>17}: {result.built_at}")
    if result.most_connected:
        click.echo("most connected:")
        show.records(
            [{"id": c.id, "degree": c.degree, "title": c.title} for c in result.most_connected],
            fmt,
        )


@graph.command()
@click.argument("fmt", metavar="FORMAT", type=click.Choice(["gexf", "graphml", "json"]))
@click.option(
    "--file", "-f", "target", type=click.Path(dir_okay=False), help="Write here (default: stdout)."
)
def export(fmt: str, target: str | None) -> None:
    """Write the graph as GEXF, GraphML or node-link JSON (Gephi, Cytoscape, networkx)."""
    from marks.graph.export import export as run

    store = state().library.store
    if target in (None, "-"):
        nodes, edges = run(store, fmt, sys.stdout)
    else:
        # Beside the target, then renamed: a failed export never leaves half a file.
        directory = os.path.dirname(os.path.abspath(target))
        fd, temporary = tempfile.mkstemp(prefix=".marks-graph-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
                nodes, edges = run(store, fmt, out)
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
    click.echo(f"exported {nodes} nodes and {edges} edges", err=True)
