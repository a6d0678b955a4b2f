"""`/browsers`: the browser profiles found on this machine, and importing from them.

Both go through `marks.browsers.service`, the service behind `marks browser list|import`, with
the home directory of the user running `marks serve`. An import reads files from this disk, so
a client names a profile only by a path that `GET /browsers` lists (`detected_profile`): any other
path is 403 before anything is opened. Like `POST /import/{format}`, the import runs in a request
thread in one transaction per browser and answers the CLI's report.
"""

from typing import Literal

import msgspec

from marks import clock
from marks.browsers.profiles import Profile
from marks.browsers.service import BrowserImport, detected_profile, import_browser, list_profiles
from marks.library import Invalid, Library
from marks.server.endpoint import Call, Endpoint
from servekit import HTTPError

# marks.browsers.paths.BROWSERS, and `all` (a test checks that the two agree).
BrowserName = Literal["chrome", "chromium", "edge", "brave", "firefox", "safari", "all"]


class BrowserImportRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What `marks browser import` takes, as JSON."""

    browser: BrowserName
    profile: str | None = None  # one profile's `path` as GET /browsers lists it; else all found
    history: bool = False  # visit counts and last visits of bookmarked pages
    all_history: bool = False  # also visited pages that are not bookmarks (tag history/BROWSER)
    since: str | None = None  # with all_history: pages visited since YYYY[-MM[-DD]]
    update: bool = False  # merge into bookmarks that exist
    dry_run: bool = False  # report what would happen; write nothing


def profiles(library: Library, call: Call) -> list[Profile]:
    return list_profiles()


def import_(library: Library, call: Call) -> list[BrowserImport]:
    body: BrowserImportRequest = call.body
    since = None
    if body.since is not None:
        try:
            since = clock.parse_user_date(body.since)
        except ValueError as error:
            raise Invalid(f"since: {error}") from None
    # Only a path the finder found itself is ever handed on (and so opened).
    profile = (
        detected_profile(body.browser, body.profile).path if body.profile is not None else None
    )
    results = import_browser(
        library,
        body.browser,
        profile=profile,
        history=body.history,
        all_history=body.all_history,
        since=since,
        update=body.update,
        dry_run=body.dry_run,
    )
    if all(result.report is None for result in results):
        # Nothing was imported (the CLI exits 1): the first browser's reason, as an error.
        reasons = [line for result in results for line in result.errors]
        raise HTTPError(422, "Invalid", reasons[0] if reasons else "nothing could be read")
    return results


ENDPOINTS = [
    Endpoint("GET", "/browsers", "Browser profiles found in the server's home directory (as "
             "`marks browser list -o json`)", profiles, response=list[Profile]),
    Endpoint("POST", "/browsers/import", "Import a browser's profiles (or all browsers found); "
             "one transaction per browser, the CLI's report for each", import_,
             body=BrowserImportRequest, response=list[BrowserImport], errors=(403, 404, 422)),
]  # fmt: skip
