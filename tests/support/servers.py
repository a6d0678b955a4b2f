"""Run a real server as a subprocess and wait until it says where it listens."""

import asyncio
import contextlib
import inspect
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

# `listening on URL` alone on a line, or as the message of a JSON log line (`--log-format json`).
_LISTENING = re.compile(r"listening on ([^\s\"]+)")
_METRICS = re.compile(r"metrics on ([^\s\"]+)")  # a metrics listener, announced before


class ServerProcess:
    """A server started as its own process; `url` is known once it has announced itself."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        self.metrics_url = ""  # where GET /metrics is served, if the server announced it
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or not self.url:
            self.stop()
            raise RuntimeError(f"server did not start: {self.argv}\n{self.output}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if not self.metrics_url and (match := _METRICS.search(line)):
                self.metrics_url = match.group(1)
            if not self.url and (match := _LISTENING.search(line)):
                self.url = match.group(1)
                self._ready.set()
        self._ready.set()  # the process ended: stop waiting

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def stop(self) -> None:
        """End it now: SIGTERM, and again until it has exited (a jobrunner server's first signal
        starts a drain that can last until its results are collected; the second ends it at
        once; two signals sent together may arrive as one), SIGKILL after 20 s."""
        deadline = time.monotonic() + 20
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(0.5)
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(5)

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def python_server(script: Path, *args: str, **kwargs: object) -> ServerProcess:
    return ServerProcess([sys.executable, str(script), *args], **kwargs)  # type: ignore[arg-type]


async def wait_until_async(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    """`wait_until` for tests inside an event loop: yields to it between checks. `predicate`
    returns a bool or an awaitable of one."""
    deadline = time.monotonic() + timeout
    while True:
        held = predicate()
        if inspect.isawaitable(held):
            held = await held
        if held or time.monotonic() >= deadline:
            return bool(held)
        await asyncio.sleep(interval)


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
