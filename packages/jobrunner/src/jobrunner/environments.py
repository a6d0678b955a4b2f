"""Environment templates: cached venvs, built on an interpreter the jail user can read.

`default` (standard library only) is built when the server starts. The other templates are listed
but only become usable once built; a job that asks for an unbuilt one fails with
`environment_error` (the submit itself is accepted, since the name is valid).
"""

import asyncio
import contextlib
import os
import subprocess
from pathlib import Path

from jobrunner.wire import EnvironmentStats

TEMPLATES = ("default", "ml-basic", "vision", "nlp", "data-science", "scientific")
BASE_PYTHON = "/usr/bin/python3"  # under /usr, which the jail binds; never a Python under /root
MARKER = ".jobrunner-built"


class EnvironmentUnavailable(RuntimeError):
    pass


def _disk_usage(root: Path) -> int:
    total = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total


class Environments:
    def __init__(self, root: Path, python: str = BASE_PYTHON) -> None:
        self.root = root
        self.python = python
        self.uses = 0
        self._sizes: dict[str, int] = {}

    def _dir(self, name: str) -> Path:
        return self.root / name

    def built(self, name: str) -> bool:
        return (self._dir(name) / MARKER).exists()

    def build_default(self) -> None:
        """Build `default` if missing (a stdlib-only venv: fast, no network)."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # noqa: S103 -- the jail user must read environments
        target = self._dir("default")
        if not self.built("default"):
            subprocess.run(
                [self.python, "-m", "venv", "--clear", "--without-pip", str(target)],
                check=True,
                capture_output=True,
            )
            (target / MARKER).write_text("default\n")
            target.chmod(0o755)
        for name in TEMPLATES:
            if self.built(name):
                self._sizes[name] = _disk_usage(self._dir(name))

    async def acquire(self, name: str) -> Path:
        """The venv for a job, or EnvironmentUnavailable with a line for the job's log."""
        if name not in TEMPLATES:
            raise EnvironmentUnavailable(f"unknown environment {name!r}")
        if not await asyncio.to_thread(self.built, name):
            raise EnvironmentUnavailable(
                f"environment {name!r} is not built on this server "
                f"(an operator builds it with `jobrunner env build {name}`)"
            )
        self.uses += 1
        return self._dir(name)

    def stats(self) -> EnvironmentStats:
        return EnvironmentStats(
            total_templates=len(TEMPLATES),
            cached_environments=len(self._sizes),
            total_uses=self.uses,
            disk_usage_mb=round(sum(self._sizes.values()) / 2**20),
        )


def interpreters() -> dict[str, str]:
    """Interpreter name -> path inside the jail. node is offered when the host has it in /usr."""
    offered = {"python": "/venv/bin/python", "bash": "/usr/bin/bash"}
    if os.access("/usr/bin/node", os.X_OK):
        offered["node"] = "/usr/bin/node"
    return offered
