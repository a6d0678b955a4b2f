"""Environment templates: TOML data files, built into cached venvs on first use or ahead.

A template is `templates/<name>.toml` in this package (`packages`: pinned version ranges). A venv is
built on an interpreter the jail user can read (`/usr/bin/python3`), into a temporary directory that
is renamed into place when complete, so a half-built environment is never used. Builds run in a
thread, one per template however many jobs wait for it; a failed build fails those jobs with
`environment_error` and the build log's last lines, and the next job tries again.
"""

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from jobrunner.wire import EnvironmentStats

TEMPLATES = ("default", "ml-basic", "vision", "nlp", "data-science", "scientific")
BASE_PYTHON = "/usr/bin/python3"  # under /usr, which the jail binds; never a Python under /root
MARKER = ".jobrunner-built"
log = logging.getLogger("jobrunner.environments")


class EnvironmentUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Template:
    name: str
    description: str
    packages: tuple[str, ...]


def load_templates(extra_dir: Path | None = None) -> dict[str, Template]:
    """The packaged templates; files in `extra_dir` with the same names replace them."""
    found: dict[str, Template] = {}
    packaged = resources.files("jobrunner") / "templates"
    for name in TEMPLATES:
        source = (
            extra_dir / f"{name}.toml"
            if extra_dir and (extra_dir / f"{name}.toml").exists()
            else packaged / f"{name}.toml"
        )
        data = tomllib.loads(source.read_text())
        found[name] = Template(name, data.get("description", ""), tuple(data.get("packages", [])))
    return found


def _disk_usage(root: Path) -> int:
    total = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total


class Environments:
    def __init__(
        self, root: Path, python: str = BASE_PYTHON, templates_dir: Path | None = None
    ) -> None:
        self.root = root
        self.python = python
        self.templates = load_templates(templates_dir)
        self.uses = 0
        self.builds = 0
        self._sizes: dict[str, int] = {}
        self._building: dict[str, asyncio.Task[Path]] = {}

    def path(self, name: str) -> Path:
        return self.root / name

    def built(self, name: str) -> bool:
        return (self.path(name) / MARKER).exists()

    def prepare(self) -> None:
        """At start: the root (readable by the jail user), `default`, and what is cached."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # noqa: S103 -- the jail user must read environments
        for leftover in self.root.glob(".building-*"):  # a build cut short by a crash
            shutil.rmtree(leftover, ignore_errors=True)
        if not self.built("default"):
            self.build("default")
        for name in TEMPLATES:
            if self.built(name):
                self._sizes[name] = _disk_usage(self.path(name))

    def build(self, name: str) -> Path:
        """Build a template's venv (blocking; the server calls it in a thread)."""
        template = self.templates[name]
        target = self.path(name)
        staging = self.root / f".building-{name}"
        shutil.rmtree(staging, ignore_errors=True)
        log_file = self.root / f"{name}.build.log"
        self.builds += 1
        log.info("building environment %s (%d packages)", name, len(template.packages))
        with open(log_file, "w") as output:
            steps = [[self.python, "-m", "venv", "--without-pip", str(staging)]]
            if template.packages:
                steps.append(
                    [
                        sys.executable,
                        "-m",
                        "pip",
                        "--python",
                        str(staging / "bin" / "python"),
                        "install",
                        "--no-input",
                        "--disable-pip-version-check",
                        "--no-warn-script-location",
                        *template.packages,
                    ]
                )
            for step in steps:
                result = subprocess.run(step, stdout=output, stderr=subprocess.STDOUT, check=False)
                if result.returncode != 0:
                    shutil.rmtree(staging, ignore_errors=True)
                    raise EnvironmentUnavailable(
                        f"building environment {name!r} failed: {_last_error(log_file)}"
                    )
        (staging / MARKER).write_text(" ".join(template.packages) + "\n")
        for directory, _dirs, _files in os.walk(staging):
            os.chmod(directory, 0o755)  # noqa: S103 -- the jail user must read environments
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        self._sizes[name] = _disk_usage(target)
        log.info("built environment %s (%d MB)", name, self._sizes[name] // 2**20)
        return target

    async def ensure(self, name: str) -> Path:
        """The built venv, building it first if needed; concurrent callers share one build."""
        if name not in self.templates:
            raise EnvironmentUnavailable(f"unknown environment {name!r}")
        if self.built(name):
            return self.path(name)
        task = self._building.get(name)
        if task is None:
            task = asyncio.create_task(asyncio.to_thread(self.build, name))
            self._building[name] = task
            task.add_done_callback(lambda _: self._building.pop(name, None))
        return await asyncio.shield(task)

    async def acquire(self, name: str) -> Path:
        path = await self.ensure(name)
        self.uses += 1
        return path

    def stats(self) -> EnvironmentStats:
        return EnvironmentStats(
            total_templates=len(TEMPLATES),
            cached_environments=len(self._sizes),
            total_uses=self.uses,
            disk_usage_mb=round(sum(self._sizes.values()) / 2**20),
        )


def _last_error(log_file: Path) -> str:
    lines = [
        line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()
    ]
    errors = [line for line in lines if line.lower().startswith("error")] or lines[-1:]
    return errors[-1][:300] if errors else "no output"


# Names clients commonly send for the same interpreter: each runs what its canonical name runs.
ALIASES = {"python": ("python3", "py"), "bash": ("sh",), "node": ("nodejs",)}


def interpreters() -> dict[str, str]:
    """Interpreter name (aliases included) -> path inside the jail. node is offered when the host
    has it in /usr."""
    offered = {"python": "/venv/bin/python", "bash": "/usr/bin/bash"}
    if os.access("/usr/bin/node", os.X_OK):
        offered["node"] = "/usr/bin/node"
    for name, path in list(offered.items()):
        offered.update(dict.fromkeys(ALIASES[name], path))
    return offered
