"""Helpers shared by the test suites: real server processes and required components."""

import os
import shutil

import pytest

STRICT = os.environ.get("CI", "").lower() == "true"


def require(ok: object, why: str) -> None:
    """Skip when a component the test needs is missing, naming it; under CI=true, fail instead."""
    if ok:
        return
    if STRICT:
        pytest.fail(f"missing component (CI=true never skips): {why}")
    pytest.skip(why)


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    require(path, "Debian package 'chromium' is not installed (make test installs it as root)")
    return str(path)
