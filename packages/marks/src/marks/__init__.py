"""marks: a bookmark toolkit with a CLI, a shell, full-text search and a REST server."""

__version__ = "0.1.0"
