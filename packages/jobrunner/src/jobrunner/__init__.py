"""jobrunner: run uploaded jobs in an nsjail sandbox behind an anonymous HTTP interface."""

__version__ = "0.1.0"
