"""`marks browser list|import` and `marks import chrome|chromium|edge|brave|firefox|safari`."""

import datetime as dt
from typing import Any

import click

from marks.cli import F, Group, global_options, state
from marks.cli import output as show
from marks.printable import escape

BROWSERS = ("chrome", "chromium", "edge", "brave", "firefox", "safari")  # = browsers.paths


@click.group(cls=Group)
@global_options
def browser() -> None:
    """Find browser profiles and import their bookmarks and history."""


@browser.command(name="list")
def list_() -> None:
    """Every profile of the six browsers: name, path, default flag, bookmark count."""
    from marks.browsers.service import list_profiles

    found = list_profiles()
    s = state()
    for profile in found:
        if profile.error:
            click.echo(f"marks: {profile.error}", err=True)
    if s.format == "json":
        show.emit_json(found)
        return
    if not found:
        click.echo("no browser profile found", err=True)
        return
    show.records(
        [
            {
                "browser": p.browser,
                "profile": p.name,
                "default": "yes" if p.default else "",
                "bookmarks": "?" if p.bookmarks is None else p.bookmarks,
                "path": p.path,
            }
            for p in found
        ],
        s.format,
    )


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    from marks import clock

    try:
        return clock.parse_user_date(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def import_options(function: F) -> F:
    for option in reversed(
        [
            click.option(
                "--profile",
                metavar="PATH",
                type=click.Path(file_okay=False),
                help="Import this profile directory only (default: every profile found).",
            ),
            click.option(
                "--history", is_flag=True, help="Visit counts and last visits of bookmarked pages."
            ),
            click.option(
                "--all-history",
                is_flag=True,
                help="Also add visited pages that are not bookmarks (tag history/BROWSER).",
            ),
            click.option(
                "--since",
                metavar="DATE",
                callback=_since,
                help="With --all-history: only pages visited since DATE (YYYY[-MM[-DD]]).",
            ),
            click.option(
                "--update",
                is_flag=True,
                help="Merge into bookmarks that exist (tags, earliest added, most visits).",
            ),
            click.option(
                "--dry-run", is_flag=True, help="Report what would happen; write nothing."
            ),
            click.option("--verbose", "-v", is_flag=True, help="List skipped and invalid entries."),
        ]
    ):
        function = option(function)
    return function


def run_import(name: str, **options: Any) -> None:
    from marks.browsers.service import import_browser

    verbose = options.pop("verbose")
    dry_run = options["dry_run"]
    s = state()
    results = import_browser(s.library, name, **options)
    failed = False
    if s.format == "json":
        show.emit_json(results)
    for result in results:
        for line in result.errors:
            click.echo(f"marks: {escape(line)}", err=True)
            failed = True
        report = result.report
        if report is None:
            continue
        if s.format != "json":
            click.echo(
                f"{result.browser}: added {report.added}, updated {report.updated}, "
                f"skipped {report.skipped}, invalid {report.invalid} "
                f"({len(result.profiles)} profile(s))" + (" [dry run]" if dry_run else ""),
                err=True,
            )
        if verbose:
            for line in report.problems:
                click.echo(f"  {escape(line)}", err=True)
    if failed:
        raise click.exceptions.Exit(1)


@browser.command(name="import")
@click.argument("name", metavar="BROWSER", type=click.Choice([*BROWSERS, "all"]))
@import_options
def import_(name: str, **options: Any) -> None:
    """Import one browser's profiles (or all browsers found); tags imported/BROWSER."""
    run_import(name, **options)


def add_import_commands(group: click.Group) -> None:
    """`marks import chrome` ... : the same as `marks browser import chrome`."""
    for name in BROWSERS:

        def command(name: str = name, **options: Any) -> None:
            run_import(name, **options)

        group.command(
            name=name,
            help=f"Import {name}'s bookmarks straight from its profiles (= browser import {name}).",
        )(import_options(command))
