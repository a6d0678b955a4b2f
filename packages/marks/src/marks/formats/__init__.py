"""File formats marks imports and exports. Readers yield `library.Record`s; writers take
`wire.Bookmark`s. A reader raises `FormatError` (one line) when the file is not its format."""

from marks.exceptions import MarksError


class FormatError(MarksError):
    pass
