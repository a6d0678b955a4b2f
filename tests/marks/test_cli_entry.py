"""The `marks` console script answers --version and --help as installed by make dev."""

import subprocess
import sys
from pathlib import Path

from marks import __version__

SCRIPT = Path(sys.executable).parent / "marks"


def test_version():
    result = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.strip() == f"marks, version {__version__}"


def test_help():
    result = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: marks")


def test_module_form_matches_script():
    result = subprocess.run(
        [sys.executable, "-m", "marks", "--version"], capture_output=True, text=True
    )
    assert result.stdout.strip() == f"marks, version {__version__}"
