"""`marks bookmark health`: a thin command over `marks.health`.

Exit status, as link checkers such as lychee give one for scripts and cron: 0 when no checked
link is confirmed broken (failures not confirmed yet are listed, not counted: one failure is no
proof), 3 when at least one is, 1 for an error, 2 for a usage error, 130 when interrupted.
"""

import datetime as dt
import sys
from typing import TYPE_CHECKING

import click

from marks import clock
from marks.cli import Command, global_options, state
from marks.cli import output as show
from marks.printable import escape

if TYPE_CHECKING:  # imported lazily at run time
    from marks.health import Options, Summary
    from marks.wire import HealthCheck


def _line(check: "HealthCheck") -> str:
    status = "" if check.status is None else str(check.status)
    mark = "" if check.reachable or check.confirmed else " (not yet confirmed)"
    detail = f"  {check.detail}" if check.detail else ""
    return escape(f"{check.result:<16} {status:>3} {check.id:>7}  {check.url}{detail}{mark}")


_EXIT_HELP = (
    "Exit status: 0 no checked link is confirmed broken; 3 at least one is; 1 an error; "
    "2 a usage error; 130 interrupted."
)


class _JsonStream:
    """One JSON object per URL, as a JSON array written as results come."""

    def __init__(self) -> None:
        self.first = True

    def write(self, check: "HealthCheck") -> None:
        sys.stdout.write(("[\n" if self.first else ",\n") + show._json.encode(check).decode())
        sys.stdout.flush()
        self.first = False

    def close(self) -> None:
        sys.stdout.write("[]\n" if self.first else "\n]\n")


def _summary(summary: "Summary", options: "Options", dry_run: bool, err: bool) -> None:
    from marks.linkcheck import LABELS, RESULTS

    def say(text: str) -> None:
        click.echo(text, err=err)

    verb = "checked" if not summary.interrupted else "interrupted after checking"
    say(f"{verb} {summary.checked} of {summary.planned} link(s) in {summary.seconds:.1f} s")
    for name in RESULTS:
        if summary.by_result.get(name):
            say(f"  {LABELS[name]:<20} {summary.by_result[name]:>7}")
    if summary.confirmed:
        say(
            f"confirmed broken: {len(summary.confirmed)} (failed on checks "
            f"{options.confirm_hours:g} h or more apart)"
        )
    again = set(summary.failed_again)
    first = [i for i in summary.unconfirmed if i not in again]
    hours = f"{options.confirm_hours:g} h"
    if first:
        say(
            f"not yet confirmed: {len(first)} failed for the first time: {_ids(first)} "
            f"({_next_check(summary.first_failing_since, options.confirm_hours)})"
        )
    if summary.failed_again:
        say(
            f"not yet confirmed: {len(summary.failed_again)} failed again, less than {hours} "
            f"after their first failure: {_ids(summary.failed_again)} "
            f"({_next_check(summary.again_failing_since, options.confirm_hours)})"
        )
    for host, count in sorted(summary.hosts_down.items()):
        say(f"host {host} did not answer: {count} more link(s) not tried")
    if summary.too_recent:
        say(
            f"skipped {summary.too_recent} checked less than {options.max_age_hours:g} h ago "
            "(--force checks them)"
        )
    if summary.not_http:
        say(f"skipped {summary.not_http} that are not http(s) links")
    if dry_run:
        say("dry run: nothing stored")


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (" …" if len(ids) > 20 else "")


def _next_check(since: dt.datetime | None, hours: float) -> str:
    """When a failure that began at `since` can be confirmed (`health_confirm_hours` later)."""
    if since is None:
        return f"a check {hours:g} h after the first failure confirms it"
    moment = clock.to_text(since + dt.timedelta(hours=hours))
    return f"a check after {moment} confirms them"


BROKEN_FOUND = 3  # the exit status when a checked link is confirmed broken


@click.command(name="health", cls=Command, epilog=_EXIT_HELP)
@click.argument("ids", nargs=-1, type=int)
@click.option("--broken", is_flag=True, help="Only links now unreachable (always re-checked).")
@click.option("--unchecked", is_flag=True, help="Only links never checked.")
@click.option(
    "--query",
    "expression",
    metavar="EXPR",
    help="Only bookmarks matching a filter (the language of `bookmark query`).",
)
@click.option("--force", is_flag=True, help="Also re-check results younger than the max age.")
@click.option("--dry-run", is_flag=True, help="Check and print, store nothing.")
@click.option("--verbose", "-v", is_flag=True, help="Print every result.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1000),
    default=None,
    help="Links checked at once [config health_concurrency, 20].",
)
@click.option(
    "--per-host",
    type=click.IntRange(1, 100),
    default=None,
    help="Links of one host at once [config health_per_host, 4].",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.01, 600),
    default=None,
    help="Seconds per link [config health_timeout, 10].",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=None,
    help="Retries after timeouts, 408, 429, 5xx [config health_retries, 2].",
)
@click.option(
    "--wayback/--no-wayback",
    default=None,
    help="Look up archived copies of confirmed-broken links [config health_wayback, off].",
)
@global_options
def health(
    ids: tuple[int, ...],
    broken: bool,
    unchecked: bool,
    expression: str | None,
    force: bool,
    dry_run: bool,
    verbose: bool,
    concurrency: int | None,
    per_host: int | None,
    timeout: float | None,
    retries: int | None,
    wayback: bool | None,
) -> None:
    """Check that bookmarked links still work (all not checked for a day, by default).

    Results: ok, redirect, blocked (a bot wall), client error, server error, timeout, SSL error,
    connection error, DNS (no such host). A link counts as broken once it failed on two checks a
    few hours apart (config health_confirm_hours, 4).
    """
    from marks import health as service
    from marks.filters import compile_filter

    s = state()
    options = service.options_from_config(
        s.config, concurrency=concurrency, per_host=per_host, timeout=timeout, retries=retries
    )
    where, bindings = compile_filter(expression) if expression else ("", [])
    selection = service.Selection(tuple(ids), broken, unchecked, where, tuple(bindings), force)
    checker = service.Health(s.library, options)
    summary = service.Summary()
    total = checker.plan(selection, summary)
    fmt = s.format
    stream = _JsonStream() if fmt == "json" else None
    bar = None
    if fmt == "table" and not verbose and sys.stderr.isatty() and total:
        bar = click.progressbar(length=total, label="checking", file=sys.stderr, width=30)
        bar.__enter__()

    def on_result(check: "HealthCheck") -> None:
        if stream is not None:
            stream.write(check)
        elif fmt == "csv":
            show.text_out().write(show_csv(check) + "\n")
        elif fmt == "plain":
            fields = [str(check.id), check.result, str(check.status or ""), escape(check.url)]
            click.echo("\t".join(fields))
        elif fmt == "urls":
            if not check.reachable:
                click.echo(escape(check.url))
        elif verbose:
            click.echo(_line(check))
        if bar is not None:
            bar.update(1)

    if fmt == "csv":
        click.echo("id,url,result,status,reachable,final_url,confirmed,detail")
    try:
        checker.run(selection, dry_run=dry_run, on_result=on_result, summary=summary)
    except KeyboardInterrupt:
        summary.interrupted = True  # results stored so far are kept
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
            click.echo(err=True)
        if stream is not None:
            stream.close()
        _summary(summary, options, dry_run, err=fmt != "table")
    if summary.interrupted:
        click.echo("marks: interrupted", err=True)
        raise click.exceptions.Exit(130)
    wanted = s.config["health_wayback"] if wayback is None else wayback
    if wanted and summary.confirmed and not dry_run:
        _archived_copies(summary.confirmed, options.timeout, err=fmt != "table")
    if summary.confirmed:
        raise click.exceptions.Exit(BROKEN_FOUND)


def _archived_copies(ids: list[int], timeout: float, err: bool) -> None:
    """The Wayback Machine's closest capture of each confirmed-broken link, stored and said."""
    from marks import wayback

    s = state()
    found = wayback.look_up(s.library, ids, s.config["wayback_api"], timeout)
    kept = [f for f in found if f.url is not None]
    click.echo(f"archived copies: {len(kept)} of {len(found)} confirmed-broken link(s)", err=err)
    for item in found:
        if item.url is not None and item.at is not None:
            line = f"  {item.bookmark_id}: dead; archived copy from {item.at:%Y-%m-%d}: {item.url}"
        else:
            line = f"  {item.bookmark_id}: no archived copy" + (
                f" ({item.error})" if item.error else ""
            )
        click.echo(escape(line), err=err)  # the capture URL is data from elsewhere


def show_csv(check: "HealthCheck") -> str:
    """One result as a CSV line (booleans as marks' CSV writes them, cells guarded)."""
    import io

    from marks.formats.csvfile import Writer, guard

    buffer = io.StringIO()
    Writer(buffer).writerow(
        [
            check.id,
            check.url,
            check.result,
            check.status or "",
            "true" if check.reachable else "false",
            check.final_url or "",
            "true" if check.confirmed else "false",
            guard(check.detail),
        ]
    )
    return buffer.getvalue().removesuffix("\n")
