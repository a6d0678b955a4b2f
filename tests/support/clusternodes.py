"""Helpers for tests of `jobrunner serve --cluster` nodes (see conftest `start_node`)."""

import asyncio
import subprocess
from pathlib import Path

import httpx
import websockets

from jobrunner.sandbox.layout import Layout
from support.jobclient import HELD, JOBRUNNER, log_of, submit
from support.servers import wait_until


def cluster_says(store: str, *command: str) -> str:
    """What `jobrunner cluster COMMAND --cluster STORE` prints, the command succeeding."""
    return subprocess.run(
        [JOBRUNNER, "cluster", *command, "--cluster", store],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def submit_held(url: str, **manifest: object) -> str:
    """A job that runs until `let_go` (see jobclient.HELD); its id."""
    response = submit(url, {"main.py": HELD}, {"entrypoint": "main.py", **manifest})
    assert response.status_code == 200, response.text
    return str(response.json()["job_id"])


def running_on(states: list[Path], job_id: str) -> Path | None:
    """The state dir of the node whose sandbox holds the job's work dir (it runs there)."""
    for state in states:
        if (Layout.for_state(state).work / job_id).exists():
            return state
    return None


def let_go(url: str, states: list[Path], job_id: str) -> None:
    """Once the HELD job says it runs (its log, read through `url`), let it end."""
    assert wait_until(lambda: "held" in log_of(url, job_id), timeout=60), job_id
    state = running_on(states, job_id)
    assert state is not None, job_id
    (Layout.for_state(state).work / job_id / "go").write_text("")


def status(url: str, job_id: str) -> dict:
    response = httpx.get(f"{url}/status/{job_id}", timeout=10)
    assert response.status_code == 200, response.text
    return dict(response.json())


def follow(url: str, job_id: str) -> tuple[str, int | None, str | None]:
    """The whole live log of a job over WebSocket, its close code and reason."""

    async def run() -> tuple[str, int | None, str | None]:
        ws_url = url.replace("http", "ws", 1) + f"/logs/{job_id}/stream"
        async with websockets.connect(ws_url) as socket:
            parts = []
            try:
                while True:
                    parts.append(str(await socket.recv()))
            except websockets.ConnectionClosed:
                return "".join(parts), socket.close_code, socket.close_reason

    return asyncio.run(run())
