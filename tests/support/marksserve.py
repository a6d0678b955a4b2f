"""A real `marks serve` process on a free loopback port, over a given database and config."""

from pathlib import Path

from support.marksrun import MARKS
from support.servers import ServerProcess


def start_marks(db: Path, home: Path, *args: str, env: dict[str, str] | None = None):
    """`marks serve --port 0` with XDG dirs under `home`; returns the running ServerProcess."""
    environment = {
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "MARKS_DB": str(db),
        **(env or {}),
    }
    return ServerProcess([MARKS, "--db", str(db), "serve", "--port", "0", *args], env=environment)
