"""The domain errors: one root, `MarksError`, whose message is the one line a person can act on.

The service layer and the modules below it raise these; each front end (CLI, shell, server) maps
them once at its edge. `from marks.library import MarksError, NotFound, Duplicate, Invalid` keeps
working for code written before this module existed.
"""


class MarksError(Exception):
    """An operation failed; str(error) is the one line to show."""


class NotFound(MarksError):
    pass


class Duplicate(MarksError):
    def __init__(self, existing_id: int, url: str) -> None:
        super().__init__(f"already bookmarked as {existing_id}: {url}")
        self.existing_id = existing_id


class Invalid(MarksError):
    """What the person asked for cannot be done as asked (bad value, bad syntax)."""


class Conflict(MarksError):
    """The library is not in the state the operation needs (the graph is not built yet)."""


class NotAllowed(MarksError):
    """Not for this caller: the server refuses a browser profile path it did not find itself."""
