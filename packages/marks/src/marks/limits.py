"""Every size limit of marks, defined once (the CLI, the shell and the server read them here)."""

SEARCH_RESULTS = 50  # `bookmark search` results by default (config `search_limit`)
LS_SHOWN = 200  # bookmarks an `ls` shows before saying how many more there are
POPULAR = 100  # the size of /popular (the interface says 100)
RECENT_SHOWN = 20  # entries the shell's `recent` shows by default
COMPLETIONS = 200  # tag names offered to completion at once
