"""`marks db ...`: facts about the database and its upkeep."""

from pathlib import Path

import click

from marks.cli import Group, confirm, global_options, state
from marks.cli import output as show


@click.group(cls=Group)
@global_options
def db() -> None:
    """Inspect and maintain the database."""


def _facts(facts: dict) -> None:
    if state().format == "json":
        show.emit_json(facts)
        return
    width = max(len(key) for key in facts)
    for key, value in facts.items():
        click.echo(f"{key.replace('_', ' '):>{width}}: {'' if value is None else value}")


@db.command()
def info() -> None:
    """Where the database is and what it holds."""
    from marks import maintenance

    _facts(maintenance.info(state().library))


@db.command()
def schema() -> None:
    """The SQL schema."""
    from marks import maintenance

    click.echo(maintenance.schema_sql(state().library), nl=False)


@db.command()
def stats() -> None:
    """Counts: starred, unread, broken, domains, visits."""
    from marks import maintenance

    _facts(maintenance.stats(state().library))


@db.command()
def vacuum() -> None:
    """Compact the database file."""
    from marks import maintenance

    before, after = maintenance.vacuum(state().library)
    click.echo(f"{before} -> {after} bytes", err=True)


@db.command()
def dedupe() -> None:
    """Merge bookmarks that are the same page (http/https, www., trailing /, utm_ tags)."""
    from marks import maintenance

    library = state().library
    groups = maintenance.duplicate_groups(library)
    if not groups:
        click.echo("no duplicates", err=True)
        return
    for group in groups[:20]:
        urls = [library.get(i).url for i in group]
        click.echo(
            f"keep {group[0]} {urls[0]}; merge "
            + ", ".join(f"{i} {u}" for i, u in zip(group[1:], urls[1:], strict=True)),
            err=True,
        )
    confirm(f"Merge {sum(len(g) - 1 for g in groups)} duplicate(s) in {len(groups)} group(s)?")
    click.echo(f"merged {maintenance.merge_duplicates(library, groups)} duplicate(s)", err=True)


@db.command(name="build-index")
def build_index() -> None:
    """Rebuild the full-text index from the bookmarks."""
    from marks import maintenance

    click.echo(f"indexed {maintenance.build_index(state().library)} bookmark(s)", err=True)


@db.command(name="index-stats")
def index_stats() -> None:
    """The full-text index: rows, terms, size, integrity."""
    from marks import maintenance

    _facts(maintenance.index_stats(state().library))


@db.command()
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
def backup(path: Path) -> None:
    """Copy the whole database, snapshots included, to FILE (consistent while in use)."""
    from marks import maintenance

    size = maintenance.backup(state().library, path)
    click.echo(f"backed up to {path} ({size} bytes)", err=True)


@db.command()
def integrity() -> None:
    """Check the database: SQLite's own check, foreign keys, every stored page's checksum."""
    from marks import maintenance
    from marks.exceptions import MarksError

    facts = maintenance.integrity(state().library)
    problems = facts.pop("problems")
    if state().format == "json":
        show.emit_json({**facts, "problems": problems})
    else:
        _facts(facts)
        for problem in problems[:50]:
            click.echo(f"problem: {problem}", err=True)
    if problems:
        raise MarksError(f"{len(problems)} problem(s) found")
