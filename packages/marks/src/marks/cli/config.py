"""`marks config ...`: the TOML settings file."""

import click

from marks.cli import Group, WordsCommand, global_options, state
from marks.cli import output as show


@click.group(cls=Group)
@global_options
def config() -> None:
    """Show and change settings."""


@config.command(name="show")
def show_() -> None:
    """Every setting in effect, as TOML (or JSON with -o json), and where the file is."""
    from marks import settings

    values = settings.load()
    if state().format == "json":
        show.emit_json({"path": str(settings.config_path()), "values": values})
        return
    click.echo(f"# {settings.config_path()}\n")
    click.echo(settings.to_toml(values, comments=True), nl=False)


@config.command(name="set", cls=WordsCommand)
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Set KEY to VALUE (checked against the key's type; the file is replaced atomically).

    A VALUE starting with `-` is a value, not an option: `config set list_limit -5` says why -5
    is refused."""
    from marks import settings

    stored = settings.set_value(key, value)
    click.echo(settings.to_toml({key: stored}).strip(), err=True)


@config.command()
@click.option("--force", is_flag=True, help="Replace an existing file.")
def init(force: bool) -> None:
    """Write a config file with every key at its default."""
    from marks import settings

    click.echo(f"wrote {settings.init(force=force)}", err=True)


@config.command()
@click.option("--new", is_flag=True, help="Replace the token (paired clients must pair again).")
def token(new: bool) -> None:
    """Show the API token that clients such as the browser extension send (made on first use)."""
    from marks import settings
    from marks.server.settings import new_token

    current = settings.load()["api_token"]
    if new or not current:
        current = settings.store_value("api_token", new_token())
        click.echo("stored a new API token in " + str(settings.config_path()), err=True)
    click.echo(current)
