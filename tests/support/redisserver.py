"""A real redis-server (Debian's) on a free loopback port, in a directory of its own."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

from support import require


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """`stop()` saves (SHUTDOWN SAVE, as an operator's restart of a persistent store would) and
    `start()` again on the same port loads that save: the cluster's state survives a restart."""

    def __init__(self, folder: Path, *options: str, login: tuple[str, str] | None = None) -> None:
        """`options`: more redis-server options (ACL users, TLS); `login`: the user and password
        redis-cli gives (with `--user default off` among the options)."""
        require(shutil.which("redis-server") is not None, "redis-server (ci/debian-packages.txt)")
        self.folder = folder
        self.port = free_port()
        self.options = options
        self.login = login
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.folder),
                "--save", "",
                "--appendonly", "no",
                "--protected-mode", "no",
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.cli("PING") == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def cli(self, *args: str) -> str:
        login = ["--user", self.login[0], "--pass", self.login[1]] if self.login else []
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), *login, "--no-auth-warning", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.cli("SHUTDOWN", "SAVE")
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
            self.proc = None


class Monitor:
    """Every command the server runs (redis-cli MONITOR), written to a file as it comes."""

    def __init__(self, server: RedisServer, folder: Path) -> None:
        self.path = folder / "monitor.txt"
        self.output = self.path.open("wb")
        self.proc = subprocess.Popen(
            ["redis-cli", "-p", str(server.port), "monitor"], stdout=self.output
        )

    def count(self, *words: str) -> int:
        """Commands seen so far whose line holds every one of `words` (quoted as MONITOR does)."""
        quoted = [f'"{word}"' for word in words]
        lines = self.path.read_text(errors="replace").splitlines()
        return sum(1 for line in lines if all(word in line for word in quoted))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(5)
        self.output.close()
