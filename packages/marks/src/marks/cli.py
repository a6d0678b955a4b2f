"""The `marks` command line. Groups import their modules lazily so `--help` stays fast."""

import click

from marks import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="marks")
def main() -> None:
    """Keep, search and check your bookmarks."""
