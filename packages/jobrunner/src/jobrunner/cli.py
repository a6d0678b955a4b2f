"""The `jobrunner` command line. Commands import their modules lazily so `--help` stays fast."""

import click

from jobrunner import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="jobrunner")
def main() -> None:
    """Run uploaded jobs in an nsjail sandbox behind an anonymous HTTP interface."""
