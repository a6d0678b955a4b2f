from pathlib import Path

import pytest

from support.servers import ServerProcess, python_server

APP = Path(__file__).with_name("app_under_test.py")


@pytest.fixture
def start_app():
    started: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        server = python_server(APP, *args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def app(start_app) -> ServerProcess:
    return start_app()
