"""`marks content ...`: what the pages say."""

import click

from marks.cli import Group, global_options
from marks.cli.autotag import auto_tag


@click.group(cls=Group)
@global_options
def content() -> None:
    """Fetch, view and auto-tag page content."""


content.add_command(auto_tag)
