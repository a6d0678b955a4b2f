"""`marks plugin ...`: what is installed, what each plugin is, and which ones run."""

import click

from marks.cli import Group, global_options, state
from marks.cli import output as show
from marks.plugins import TYPES, PluginInfo


@click.group(cls=Group)
@global_options
def plugin() -> None:
    """List, describe, enable and disable plugins."""


def _status(info: PluginInfo) -> str:
    if info.problem:
        return "broken"
    return "enabled" if info.enabled else "disabled"


@plugin.command(name="list")
def list_() -> None:
    """Installed plugins grouped by type, in the order they run."""
    infos = sorted(state().plugins.infos(), key=lambda i: (i.type, i.priority, i.name))
    fmt = state().format
    if fmt == "json":
        show.emit_json(infos)
        return
    if fmt in ("csv", "plain", "urls"):
        show.records([_row(info) for info in infos], "csv" if fmt == "csv" else "plain")
        return
    if not infos:
        click.echo("no plugins installed", err=True)
        return
    for kind in sorted({info.type for info in infos}):
        click.echo(f"{kind or '(no type)'}:")
        rows = [
            (i.name, i.version, i.priority, _status(i), i.description)
            for i in infos
            if i.type == kind
        ]
        show.table(rows, ("  NAME", "VERSION", "PRIORITY", "STATUS", "DESCRIPTION"))


def _row(info: PluginInfo) -> dict:
    return {
        "name": info.name,
        "type": info.type,
        "version": info.version,
        "priority": info.priority,
        "status": _status(info),
        "description": info.description,
    }


@plugin.command()
@click.argument("name")
def info(name: str) -> None:
    """Everything about one plugin."""
    found = state().plugins.info(name)
    if state().format == "json":
        show.emit_json(found)
        return
    lines = {
        "name": found.name,
        "type": found.type,
        "version": found.version,
        "priority": found.priority,
        "status": _status(found),
        "description": found.description,
        "author": found.author,
        "dependencies": ", ".join(found.dependencies) or "none",
        "built in": "yes" if found.builtin else "no",
        "entry point": found.entry_point,
    }
    if found.missing:
        lines["missing"] = ", ".join(found.missing)
    if found.problem:
        lines["problem"] = found.problem
    for key, value in lines.items():
        click.echo(f"{key:>12}: {value}")


@plugin.command()
def types() -> None:
    """The five plugin types and what each does."""
    counts: dict[str, int] = dict.fromkeys(TYPES, 0)
    for found in state().plugins.infos():
        if found.type in counts:
            counts[found.type] += 1
    show.records(
        [{"type": k, "installed": counts[k], "does": text} for k, text in TYPES.items()],
        state().format,
    )


def _switch(name: str, enabled: bool) -> None:
    from marks import settings

    found = state().plugins.info(name)  # an unknown name is an error, not a new config entry
    chosen = dict(state().config["plugins"])
    chosen[found.name] = enabled
    settings.store_value("plugins", chosen)
    click.echo(f"{'enabled' if enabled else 'disabled'} plugin {found.name}", err=True)


@plugin.command()
@click.argument("name")
def enable(name: str) -> None:
    """Let a plugin run (the setting lives in the config file)."""
    _switch(name, True)


@plugin.command()
@click.argument("name")
def disable(name: str) -> None:
    """Stop a plugin from running, without uninstalling it."""
    _switch(name, False)
