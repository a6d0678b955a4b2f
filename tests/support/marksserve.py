"""A real `marks serve` process on a free loopback port, over a given database and config; and
the real app in this process, for the fast tests beside them."""

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


class InProcess:
    """The real app (`make_app`) called in this process through httpx's ASGI transport: no socket,
    the app's lifespan run around it. Its methods are httpx's, called synchronously."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        import httpx

        self.loop = loop
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        )

    def request(self, method: str, url: str, **options: Any) -> Any:
        return self.loop.run_until_complete(self.client.request(method, url, **options))

    def get(self, url: str, **options: Any) -> Any:
        return self.request("GET", url, **options)

    def post(self, url: str, **options: Any) -> Any:
        return self.request("POST", url, **options)

    def put(self, url: str, **options: Any) -> Any:
        return self.request("PUT", url, **options)

    def patch(self, url: str, **options: Any) -> Any:
        return self.request("PATCH", url, **options)

    def delete(self, url: str, **options: Any) -> Any:
        return self.request("DELETE", url, **options)


@contextlib.contextmanager
def in_process(settings: Any) -> Iterator[InProcess]:
    """`marks serve`'s app over `settings` (a ServerSettings), started and stopped as the server
    starts and stops it (its lifespan), answering requests for http://testserver."""
    from marks.server.app import make_app

    app = make_app(settings)
    loop = asyncio.new_event_loop()
    lifespan = app.router.lifespan_context(app)
    loop.run_until_complete(lifespan.__aenter__())
    http = InProcess(app, loop)
    try:
        yield http
    finally:
        loop.run_until_complete(http.client.aclose())
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        loop.close()
