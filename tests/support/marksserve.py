"""A real `marks serve` process on a free loopback port, over a given database and config."""

from pathlib import Path

import pytest

from support.marksrun import MARKS
from support.servers import ServerProcess


def start_marks(db: Path, home: Path, *args: str, env: dict[str, str] | None = None):
    """`marks serve --port 0` with XDG dirs and HOME under `home` (`home/home`: the browser
    profiles the server finds are the ones a test writes there, never the user's); returns the
    running ServerProcess."""
    (home / "home").mkdir(parents=True, exist_ok=True)
    environment = {
        "HOME": str(home / "home"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "MARKS_DB": str(db),
        **(env or {}),
    }
    return ServerProcess([MARKS, "--db", str(db), "serve", "--port", "0", *args], env=environment)


class Served:
    """A running server with its URL, the token it printed, and an httpx client for it."""

    def __init__(self, process, db: Path, home: Path) -> None:
        import re

        import httpx

        self.process = process
        self.db = db
        self.home = home
        self.url = process.url
        found = re.search(r"pairing token for the browser extension: (\S+)", process.output)
        self.token = found.group(1) if found else ""
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def authed(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}"}

    def add(self, url: str, **fields) -> dict:
        response = self.http.post("/bookmarks", json={"url": url, **fields})
        assert response.status_code == 201, response.text
        return response.json()

    def close(self) -> None:
        self.http.close()
        self.process.stop()


@pytest.fixture
def served(tmp_path):
    """A live `marks serve` on a fresh database under the test's temporary directory."""
    process = start_marks(tmp_path / "library.db", tmp_path)
    server = Served(process, tmp_path / "library.db", tmp_path)
    yield server
    server.close()
