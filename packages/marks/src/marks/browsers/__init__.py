"""Reading bookmarks and history straight from browser profiles.

`paths` says where each browser keeps its profiles on each platform; `profiles` finds them under
a home directory; `chromium`, `firefox` and `safari` read one profile's files into
`library.Record`s and know nothing of marks' database; `service` imports them through
`importing.import_records`, the one write path every import shares.
"""

from marks.exceptions import MarksError, NotAllowed, NotFound


class BrowserError(MarksError):
    """A profile cannot be read: missing, corrupt or of unknown schema (one line, naming it)."""


class NoProfile(BrowserError, NotFound):
    """No profile of the browser asked for was found under the home directory."""


class UnknownProfile(BrowserError, NotAllowed):
    """A profile path that is not one the finder found (see `service.detected_profile`)."""
