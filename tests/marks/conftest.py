"""Fixtures: a real SQLite library file per test, and the real CLI run in-process."""

from pathlib import Path

import pytest

from marks.library import Library
from marks.store import Store
from support.marksrun import Runner
from support.marksserve import served  # noqa: F401  (a live `marks serve`, for test_server*)

DATA = Path(__file__).with_name("data")


@pytest.fixture
def db_path(tmp_path, monkeypatch) -> Path:
    # Keep every test away from the real user's files.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
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
