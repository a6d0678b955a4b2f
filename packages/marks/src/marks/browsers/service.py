"""Importing from browser profiles: the one entry point for the CLI, the shell and the server.

Each browser's profiles are read and imported through `importing.import_records` (the merge rule and
report every import shares), in one transaction per browser, so a browser that fails leaves the
library as it was and `all` goes on with the others. `--history` sets the visit count and last
visit of bookmarked pages; `all_history` also adds visited pages that are not bookmarks.
"""

import contextlib
import datetime as dt
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

import msgspec

from marks import importing
from marks.browsers import (
    BrowserError,
    NoProfile,
    UnknownProfile,
    chromium,
    firefox,
    profiles,
    safari,
)
from marks.browsers.paths import BROWSERS, FAMILY
from marks.browsers.profiles import Profile
from marks.browsers.visits import Visit
from marks.library import Invalid, Library, Record
from marks.wire import ImportReport


class Source(Protocol):
    """What every browser's `Reader` offers, opened as a context manager."""

    def __enter__(self) -> "Source": ...
    def __exit__(self, *exc: object) -> None: ...
    def count(self) -> int: ...
    def urls(self) -> Iterator[str]: ...
    def bookmarks(self) -> Iterator[Record]: ...
    def history(self, since: dt.datetime | None = None) -> Iterator[Visit]: ...


READERS: dict[str, Callable[[Path], Source]] = {
    "chromium": chromium.Reader,
    "firefox": firefox.Reader,
    "safari": safari.Reader,
}


class BrowserImport(msgspec.Struct, kw_only=True):
    """What `browser import` reports for one browser."""

    browser: str
    profiles: list[str] = []  # the profile paths read
    report: ImportReport | None = None  # None when the browser's import failed
    errors: list[str] = []  # one line per profile that could not be read


def reader(browser: str, path: Path | str) -> Source:
    return READERS[FAMILY[browser]](Path(path))


def list_profiles(
    home: Path | str | None = None, browsers: Iterable[str] = BROWSERS
) -> list[Profile]:
    """Every profile found, with its bookmark count (or the one-line reason it cannot be read)."""
    found = profiles.find(home, browsers)
    for profile in found:
        try:
            with reader(profile.browser, profile.path) as source:
                profile.bookmarks = source.count()
        except BrowserError as error:
            profile.error = str(error)
    return found


def detected_profile(browser: str, path: str, home: Path | str | None = None) -> Profile:
    """The profile of `browser` at `path`, if the finder found it under `home`; else
    UnknownProfile. For a caller who must not make marks read any directory it names (a client
    of the server): it can pick a profile `list_profiles` shows, nothing else. The path is only
    compared as text with what was found (`~` and `..` resolved as text, symlinks not followed),
    so the caller's path itself is never opened."""
    if browser == "all":
        raise Invalid("a profile belongs to one browser, not all")
    wanted = os.path.normpath(os.path.expanduser(path))
    for found in profiles.find(home, (browser,)):
        if os.path.normpath(found.path) == wanted:
            return found
    raise UnknownProfile(
        f"{path[:200]!r} is not a {browser} profile found under the home directory"
    )


def _records(
    browser: str,
    source: Source,
    *,
    history: bool,
    all_history: bool,
    since: dt.datetime | None,
) -> Iterator[Record]:
    """One profile's bookmarks (with visit data from its history when asked), then, with
    `all_history`, its visited pages that are not bookmarks.

    Visits are matched to bookmarks by the exact URL: each browser stores both in the same
    canonical form (Firefox even shares the row), and no URL is parsed twice."""
    mark = f"imported/{browser}"
    visits: dict[str, tuple[int, dt.datetime | None]] = {}
    if history:
        bookmarked = set(source.urls())
        for visit in source.history():
            if visit.url in bookmarked:
                count, last = visits.get(visit.url, (0, None))
                latest = max(filter(None, (last, visit.last)), default=None)
                visits[visit.url] = (count + visit.count, latest)
            elif (
                all_history
                and visit.count > 0
                and (since is None or (visit.last is not None and visit.last >= since))
            ):
                yield Record(
                    url=visit.url,
                    title=visit.title,
                    tags=[mark, f"history/{browser}"],
                    added=visit.last,
                    last_visited=visit.last,
                    visit_count=visit.count,
                )
        del bookmarked
    for record in source.bookmarks():
        record.tags.append(mark)
        found = visits.get(record.url)
        if found is not None:
            record.visit_count, record.last_visited = found
        yield record


def import_browser(
    library: Library,
    browser: str,
    *,
    home: Path | str | None = None,
    profile: Path | str | None = None,
    history: bool = False,
    all_history: bool = False,
    since: dt.datetime | None = None,
    update: bool = False,
    dry_run: bool = False,
) -> list[BrowserImport]:
    """Import one browser (every profile found, or the one at `profile`) or `all` of them."""
    if browser != "all" and browser not in BROWSERS:
        raise Invalid(f"unknown browser {browser!r} (use {', '.join(BROWSERS)} or all)")
    if since is not None and not all_history:
        raise Invalid("--since limits --all-history: give both")
    if all_history and not history:
        history = True  # pages from the history carry their visits
    if profile is not None:
        if browser == "all":
            raise Invalid("--profile needs one browser, not all")
        path = Path(profile).expanduser()
        if not path.is_dir():
            raise BrowserError(f"{path}: no such profile directory")
        chosen = {browser: [Profile(browser=browser, name=path.name, path=str(path))]}
    else:
        wanted = BROWSERS if browser == "all" else (browser,)
        chosen = {}
        for each in profiles.find(home, wanted):
            chosen.setdefault(each.browser, []).append(each)
        if not chosen:
            where = Path(home) if home is not None else Path.home()
            what = "browser" if browser == "all" else browser
            raise NoProfile(f"no {what} profile found under {where}")
    results: list[BrowserImport] = []
    with _rehearsal(library) if dry_run else contextlib.nullcontext():
        for name, found in chosen.items():
            results.append(
                _import_one(
                    library,
                    name,
                    found,
                    history=history,
                    all_history=all_history,
                    since=since,
                    update=update,
                    savepoint=dry_run,
                )
            )
    return results


def _import_one(
    library: Library,
    browser: str,
    found: list[Profile],
    *,
    savepoint: bool,
    update: bool,
    history: bool,
    all_history: bool,
    since: dt.datetime | None,
) -> BrowserImport:
    result = BrowserImport(browser=browser)
    with contextlib.ExitStack() as stack:
        sources: list[Source] = []
        for item in found:  # open (and check) every profile before writing anything
            try:
                sources.append(stack.enter_context(reader(browser, item.path)))
                result.profiles.append(item.path)
            except BrowserError as error:
                result.errors.append(str(error))
        if not sources:
            return result

        def records() -> Iterator[Record]:
            for source in sources:
                yield from _records(
                    browser, source, history=history, all_history=all_history, since=since
                )

        # A fresh Library per import: its tag-id cache never outlives a rolled-back import.
        fresh = Library(library.store, library.now)
        try:
            if savepoint:
                with _savepoint(library, browser):
                    result.report = importing.import_records(fresh, records(), update=update)
            else:
                result.report = importing.import_records(fresh, records(), update=update)
        except BrowserError as error:
            result.errors.append(str(error))
    return result


class _Rollback(Exception):
    pass


@contextlib.contextmanager
def _rehearsal(library: Library) -> Iterator[None]:
    """--dry-run: everything happens inside one transaction that is rolled back."""
    with contextlib.suppress(_Rollback), library.store.transaction():
        yield
        raise _Rollback


@contextlib.contextmanager
def _savepoint(library: Library, name: str) -> Iterator[None]:
    db = library.store.db
    db.execute(f'SAVEPOINT "{name}"')
    try:
        yield
    except BaseException:
        db.execute(f'ROLLBACK TO "{name}"')
        db.execute(f'RELEASE "{name}"')
        raise
    db.execute(f'RELEASE "{name}"')
