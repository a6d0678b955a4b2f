"""The client: the Python client `library` (`Client`, `verify`, ...), the command line's client
`commands` (submit, status, logs, ...) and `terminal`, which makes server text safe to print.

`jobrunner.client` is the documented import path of the client library, so its public names are
re-exported here; loaded on first use, so that `jobrunner --help` (which imports `commands`) does
not load aiohttp."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobrunner.client.library import (
        Client,
        JobrunnerError,
        RecordProblem,
        pack,
        server_url,
        verify,
    )

__all__ = ["Client", "JobrunnerError", "RecordProblem", "pack", "server_url", "verify"]


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from jobrunner.client import library

    return getattr(library, name)
