"""Imported at start-up by a Python whose PYTHONPATH holds this directory (support.nofts5's
`environment()`): every APSW connection it opens lacks SQLite's full-text modules."""

import apsw

from support.nofts5 import drop_full_text

apsw.connection_hooks.append(drop_full_text)
