"""File formats marks imports and exports. Readers yield `Record`s; writers take `wire.Bookmark`s.

This package sits below the library and knows nothing of the database: a reader turns bytes into
records, each remembering where in the file it came from and what the reader had to repair, and
the library decides what is stored. A reader raises `FormatError` (one line) when the file is not
its format.
"""

import msgspec

from marks.exceptions import MarksError
from marks.wire import Bookmark


class FormatError(MarksError):
    pass


class Record(Bookmark, kw_only=True):
    """What an importer found: a Bookmark not stored yet (id 0), before the library's rules."""

    where: str = ""  # "line 12" or "item 3": how --verbose points at the entry
    # What the reader repaired or could not read (reported, never silent).
    notes: list[str] = msgspec.field(default_factory=list)
    undated: bool = False  # the file gave no readable date for it
