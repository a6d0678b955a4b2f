"""Fixtures: a real SQLite library file per test, and the real CLI run in-process."""

import subprocess
import sys
from pathlib import Path

import pytest

from marks.library import Library
from marks.store import Store
from support.marksrun import Runner
from support.marksserve import served  # noqa: F401  (a live `marks serve`, for test_server*)

DATA = Path(__file__).with_name("data")
EXAMPLE = Path(__file__).with_name("plugin_example")


@pytest.fixture
def db_path(tmp_path, monkeypatch) -> Path:
    # Keep every test away from the real user's files.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("MARKS_DB", raising=False)
    return tmp_path / "library.db"


@pytest.fixture
def library(db_path) -> Library:
    store = Store(db_path)
    yield Library(store)
    store.close()


@pytest.fixture
def marks(db_path) -> Runner:
    return Runner(db_path)


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """tests/marks/plugin_example installed into a directory for `marks` processes' PYTHONPATH."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(EXAMPLE),
        ],
        check=True,
        capture_output=True,
    )
    return site
