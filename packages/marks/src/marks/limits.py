"""Every size limit of marks, defined once (the CLI, the shell and the server read them here)."""

SEARCH_RESULTS = 50  # `bookmark search` results by default (config `search_limit`)
LS_SHOWN = 200  # bookmarks an `ls` shows before saying how many more there are
POPULAR = 100  # the size of /popular (the interface says 100)
RECENT_SHOWN = 20  # entries the shell's `recent` shows by default
COMPLETIONS = 200  # tag names offered to completion at once
# Tags on one bookmark: far beyond any real use, and each link rewrites the bookmark's tag line and
# its index entries, so an unbounded list would let one request keep the database busy for minutes.
TAGS_PER_BOOKMARK = 1000
# How deeply a query or filter may nest (parentheses, NOT, `-`): a parser recursing without end
# would crash rather than answer, and nobody writes more than a few levels.
QUERY_NESTING = 64
# Terms in one query or filter: SQLite refuses an expression tree deeper than 1000, and a chain of
# ORs is that deep; far more than anyone types.
QUERY_TERMS = 200
# Days a deleted bookmark waits in the trash by default (config `trash_days`).
TRASH_DAYS = 30
