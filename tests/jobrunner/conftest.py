"""Fixtures: real `jobrunner serve` processes on 127.0.0.1 with the real nsjail sandbox."""

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from support.jobclient import GENEROUS, JOBRUNNER, need_sandbox, worker_key, write_allowlist
from support.servers import ServerProcess

# How long a server may take to say where it listens: in the cgroup v2 VM under TCG emulation
# (`make test-cgroup2`) Python starts an order of magnitude slower than on a host.
START_TIMEOUT = float(os.environ.get("JOBRUNNER_TEST_START_TIMEOUT", "30"))


def pytest_collection_modifyitems(config, items):
    """The rootless tests need the user the cgroup v2 VM creates (`make test-cgroup2`, see
    test_rootless.py): deselected, not skipped, where it does not exist (a cgroup v1 host
    cannot delegate a cgroup subtree to a user), so `make test` under CI=true stays whole."""
    if os.environ.get("JOBRUNNER_ROOTLESS_USER"):
        return
    kept = [item for item in items if item.get_closest_marker("rootless") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


@pytest.fixture
def state_dir() -> Iterator[Path]:
    # Every directory above the state dir must be searchable by the jail user, so not pytest's
    # tmp_path (mode 0700 under /tmp/pytest-of-root).
    path = Path(tempfile.mkdtemp(prefix="jobrunner-test-", dir="/tmp"))
    path.chmod(0o711)
    yield path
    # A worker killed mid-job (pool tests) leaves its job's tmpfs mounted: take it down, and
    # remove the jail trees (environments, work mount points) of the servers that ran here.
    layouts = [Layout.for_state(state) for state in [*path.glob("*"), *path.glob("*/*")]]
    roots = [layout.root for layout in layouts]
    for layout in layouts:  # the servers have stopped: nothing of theirs may still run
        if (cgroups := Cgroups.detect(layout.instance)) is not None:
            cgroups.reap()
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1]
        if target.startswith((str(path), *(str(root) for root in roots))):
            subprocess.run(["umount", "-l", target], check=False)
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
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
            timeout=START_TIMEOUT,
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


@pytest.fixture
def templates(state_dir):
    """Small stand-ins for two packaged environment templates: one tiny pure-Python package from
    the registry (`nlp`), and one that cannot be installed (`scientific`)."""
    folder = state_dir / "templates"
    folder.mkdir()
    (folder / "nlp.toml").write_text('description = "tiny"\npackages = ["six==1.16.0"]\n')
    (folder / "scientific.toml").write_text(
        'description = "broken"\npackages = ["this-package-does-not-exist-jobrunner==0.0.1"]\n'
    )
    return folder


@pytest.fixture
def redis_server(tmp_path):
    """A real redis-server on a free loopback port (`--save '' --appendonly no`, in tmp_path)."""
    from support.redisserver import RedisServer

    server = RedisServer(tmp_path)
    yield server
    server.kill()


@pytest.fixture
def monitor(redis_server, tmp_path):
    """Every command the test's redis-server runs, written to a file as it comes (MONITOR)."""
    from support.redisserver import Monitor

    watching = Monitor(redis_server, tmp_path)
    yield watching
    watching.close()


@pytest.fixture
def start_node(start_server, redis_server):
    """A `jobrunner serve --cluster` node: start_node(concurrency=1, *args, allow=True). Its key is
    put on the cluster's allowlist unless allow=False."""
    from support.jobclient import worker_key

    def start(
        *args: str,
        concurrency: int = 1,
        allow: bool = True,
        url: str | None = None,
        state: Path | None = None,
    ):
        node = start_server(
            *GENEROUS,
            "--cluster",
            url or redis_server.url,
            "--concurrency",
            str(concurrency),
            "--trusted-proxy",
            "127.0.0.1",
            "--lost-after",
            "3",
            *args,
            state=state,
        )
        if allow:
            subprocess.run(
                [
                    JOBRUNNER,
                    "cluster",
                    "allow",
                    worker_key(node.url),
                    "--cluster",
                    redis_server.url,
                ],
                check=True,
                capture_output=True,
            )
        return node

    return start
