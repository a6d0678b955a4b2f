"""Fixtures: real `jobrunner serve` processes on 127.0.0.1 with the real nsjail sandbox."""

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.jobclient import GENEROUS, JOBRUNNER, need_sandbox, worker_key, write_allowlist
from support.servers import ServerProcess


@pytest.fixture
def state_dir() -> Iterator[Path]:
    # Every directory above the state dir must be searchable by the jail user, so not pytest's
    # tmp_path (mode 0700 under /tmp/pytest-of-root).
    path = Path(tempfile.mkdtemp(prefix="jobrunner-test-", dir="/tmp"))
    path.chmod(0o711)
    yield path
    # A worker killed mid-job (pool tests) leaves its job's tmpfs mounted: take it down.
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1]
        if target.startswith(str(path)):
            subprocess.run(["umount", "-l", target], check=False)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start_server(state_dir):
    started: list[ServerProcess] = []

    def start(
        *args: str, state: Path | None = None, env: dict[str, str] | None = None
    ) -> ServerProcess:
        need_sandbox()
        server = ServerProcess(
            [
                JOBRUNNER,
                "serve",
                "--port",
                "0",
                "--state-dir",
                str(state or state_dir / f"s{len(started)}"),
                *args,
            ],
            env=env,
        )
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(start_server) -> ServerProcess:
    """A server whose rate limits do not get in the way of tests about something else."""
    return start_server(*GENEROUS)


@pytest.fixture
def cluster(start_server, state_dir):
    """Start workers and a pool: cluster(workers=2, entries=None, pool_args=())."""
    started: list[ServerProcess] = []

    def make(workers: int = 2, entries=None, pool_args=(), worker_args=()):
        nodes = [
            start_server(
                *GENEROUS,
                "--concurrency",
                "1",
                "--trusted-proxy",
                "127.0.0.1",
                *(worker_args[n] if n < len(worker_args) else ()),
            )
            for n in range(workers)
        ]
        if entries is None:
            entries = [(node.url, worker_key(node.url)) for node in nodes]
        config = write_allowlist(state_dir / f"workers-{len(started)}.toml", entries)
        pool = ServerProcess(
            [
                JOBRUNNER,
                "pool",
                "--workers",
                str(config),
                "--port",
                "0",
                "--state-dir",
                str(state_dir / f"pool{len(started)}"),
                "--health-interval",
                "0.3",
                *pool_args,
            ]
        )
        started.append(pool)
        return pool, nodes

    yield make
    for pool in started:
        pool.stop()
