"""Rootless mode (issue 23): `jobrunner serve` as an unprivileged user, with a delegated cgroup v2
subtree and a subordinate id range, enforces the limits root does (sandbox/privilege.py).

Only in `make test-cgroup2`: the VM creates the user named by JOBRUNNER_ROOTLESS_USER (with
/etc/subuid and /etc/subgid ranges) on a cgroup-v2-only kernel; elsewhere conftest.py deselects
these tests (a cgroup v1 host cannot delegate cgroups to a user). Each server gets a cgroup of its
own, delegated as systemd's `Delegate=yes` does: the directory and its cgroup.procs,
cgroup.subtree_control and cgroup.threads belong to the user. A few of the root mode's hostile
jobs run again here against a rootless server (the `server` fixture below).
"""

import importlib.util
import os
import pwd
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobrunner.sandbox.layout import Layout
from support import require
from support.jobclient import GENEROUS, HELD, JOBRUNNER, log_of, run_job, submit, wait_finished
from support.servers import ServerProcess, wait_until

pytestmark = pytest.mark.rootless
USER = os.environ.get("JOBRUNNER_ROOTLESS_USER", "")
UNIFIED = Path("/sys/fs/cgroup")
DELEGATED = UNIFIED / "jobrunner-rootless-test"  # one child per server start
START_TIMEOUT = float(os.environ.get("JOBRUNNER_TEST_START_TIMEOUT", "30"))
# argv: sh -c ENTER CGROUP setpriv ... jobrunner serve ...: into the cgroup (as root, as systemd
# puts a service's process), then the unprivileged user for good.
ENTER = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


@dataclass
class Rootless:
    server: ServerProcess | None  # None: a start that was meant to fail
    output: str  # of a start that failed
    state: Path
    cgroup: Path
    uid: int

    @property
    def running(self) -> ServerProcess:
        assert self.server is not None
        return self.server

    @property
    def url(self) -> str:
        return self.running.url


def _delegate(cgroup: Path, uid: int, gid: int) -> None:
    DELEGATED.mkdir(exist_ok=True)
    for parent in (UNIFIED, DELEGATED):  # the controllers reach the delegated cgroup
        (parent / "cgroup.subtree_control").write_text("+memory +pids +cpu")
    cgroup.mkdir()
    for path in (cgroup, *(cgroup / name for name in ("cgroup.procs", "cgroup.subtree_control"))):
        os.chown(path, uid, gid)
    os.chown(cgroup / "cgroup.threads", uid, gid)


def _remove(cgroup: Path) -> None:
    if not cgroup.is_dir():
        return
    (cgroup / "cgroup.kill").write_text("1")
    assert wait_until(lambda: not any(_pids(cgroup)), timeout=30), cgroup
    for child in sorted(cgroup.rglob("*"), key=lambda p: -len(p.parts)):
        if child.is_dir():
            child.rmdir()
    cgroup.rmdir()


def _pids(cgroup: Path) -> Iterator[int]:
    for procs in cgroup.rglob("cgroup.procs"):
        try:
            yield from (int(pid) for pid in procs.read_text().split())
        except OSError:
            continue


@pytest.fixture
def start_rootless(state_dir) -> Iterator:
    require(
        os.geteuid() == 0, "setting a rootless server up (a user, a delegated cgroup) needs root"
    )
    require(USER, "JOBRUNNER_ROOTLESS_USER: a user with subordinate ids (make test-cgroup2)")
    require((UNIFIED / "cgroup.controllers").exists(), "the unified cgroup v2 hierarchy")
    entry = pwd.getpwnam(USER)
    started: list[Rootless] = []
    cgroups: list[Path] = []  # removed at the end, whether their server started or not

    def start(*args: str, delegate: bool = True, wait: bool = True) -> Rootless:
        number = len(cgroups)
        cgroup = DELEGATED / f"{state_dir.name}-{number}"  # a fresh one per start, as systemd's
        state = state_dir / f"rootless{number}"
        cgroups.append(cgroup)
        if delegate:
            _delegate(cgroup, entry.pw_uid, entry.pw_gid)
        else:  # a cgroup the user was not given
            DELEGATED.mkdir(exist_ok=True)
            cgroup.mkdir()
        state.mkdir()
        os.chown(state, entry.pw_uid, entry.pw_gid)
        argv = [
            *("/bin/sh", "-c", ENTER, str(cgroup)),
            *("setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"),
            *("--", JOBRUNNER, "serve", "--port", "0", "--state-dir", str(state), *GENEROUS),
            *args,
        ]
        env = {**os.environ, "HOME": str(state)}
        if wait:
            server = ServerProcess(argv, env=env, timeout=START_TIMEOUT)
            started.append(Rootless(server, "", state, cgroup, entry.pw_uid))
        else:  # a start that must fail: its output, once it has ended
            done = subprocess.run(
                argv, env=env, capture_output=True, text=True, timeout=START_TIMEOUT
            )
            started.append(Rootless(None, done.stdout + done.stderr, state, cgroup, entry.pw_uid))
        return started[-1]

    yield start
    for rootless in started:
        if rootless.server is not None:
            rootless.server.stop()
    for cgroup in cgroups:
        _remove(cgroup)


@pytest.fixture
def server(start_rootless) -> ServerProcess:
    """For the root mode's tests imported below: the same jobs against a rootless server."""
    return start_rootless().running


def test_a_rootless_server_says_so_and_runs_jobs_with_cpu_accounted(start_rootless):
    rootless = start_rootless()
    (line,) = [line for line in rootless.running.lines if line.startswith("sandbox: ")]
    assert line.startswith("sandbox: rootless, uid ") and str(rootless.cgroup) in line, line
    code = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3:\n"
    code += "    pass\nprint('done')\n"
    record = run_job(rootless.url, code)
    assert record["status"] == "completed", record
    assert log_of(rootless.url, record["job_id"]) == "done\n"
    assert record["execution_metadata"]["cpu_seconds"] >= 0.3
    assert record["execution_metadata"]["memory_peak_bytes"] > 0
    # The server itself sits in the leaf `server` of its delegated cgroup.
    assert rootless.running.proc.pid in _pids(rootless.cgroup / "server")


def test_jobs_are_neither_the_servers_user_nor_able_to_read_its_files(start_rootless):
    rootless = start_rootless()
    key = rootless.state / "worker.key"
    code = f"import os\nprint('visible', os.path.exists({str(key)!r}))\n" + HELD
    response = submit(rootless.url, {"main.py": code}, {"entrypoint": "main.py"})
    job_id = response.json()["job_id"]
    assert wait_until(lambda: "held" in log_of(rootless.url, job_id), timeout=60)
    # The jail's processes (nsjail's child cgroup of the job's), as the host sees them: one
    # subordinate id, not the server's user (nsjail itself, outside the jail, is the server).
    jails = list((rootless.cgroup / "jobrunner").glob(f"*/{job_id}/NSJAIL.*"))
    uids = {_uid(pid) for jail in jails for pid in _pids(jail)} - {None}
    (job_uid,) = uids
    assert job_uid is not None and job_uid != rootless.uid, uids
    assert key.stat().st_uid == rootless.uid and key.stat().st_mode & 0o077 == 0
    # Even given the path, that uid cannot read the server's key (nor list its state dir).
    for command in (["cat", str(key)], ["ls", str(rootless.state / "jobs")]):
        refused = subprocess.run(
            ["setpriv", f"--reuid={job_uid}", f"--regid={job_uid}", "--clear-groups", *command],
            capture_output=True,
            text=True,
        )
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, refused
    _release(rootless, job_id)
    assert wait_finished(rootless.url, job_id)["status"] == "completed"
    assert log_of(rootless.url, job_id).startswith("visible False\n")


def _release(rootless: Rootless, job_id: str) -> None:
    """Let a HELD job go. Its work dir is a tmpfs of the server's own mount namespace, owned by
    the server's user namespace (where the host's root is no id, so cannot create a file): the
    file goes in from inside both, as that namespace's root (the server's user)."""
    # The path in the server's mount namespace (its `work/` is a tmpfs of that namespace, so the
    # host sees it empty): the rootless layout's, as the server computes it.
    work = Layout.for_state(rootless.state, jail_root=rootless.state / "jail").work / job_id
    pid = str(rootless.running.proc.pid)
    subprocess.run(["nsenter", "-t", pid, "-U", "-m", "--", "touch", str(work / "go")], check=True)


def _uid(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def test_a_cgroup_that_was_not_delegated_is_refused_with_one_clear_line(start_rootless):
    started = time.monotonic()
    rootless = start_rootless(delegate=False, wait=False)
    output = rootless.output
    assert "no working sandbox: cannot use the cgroup" in output, output
    assert "Delegate=yes" in output and "Traceback" not in output, output
    assert time.monotonic() - started < START_TIMEOUT


def _root_mode_tests(module: str, *names: str) -> dict[str, object]:
    """Test functions of the root mode's sandbox tests, to run here against `server` above."""
    spec = importlib.util.spec_from_file_location(
        f"rootless_{module}", Path(__file__).with_name(f"{module}.py")
    )
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return {name: getattr(loaded, name) for name in names}


globals().update(
    _root_mode_tests(
        "test_sandbox",
        "test_memory_limit_kills_the_job",
        "test_fork_bomb_is_bounded",
        "test_seccomp_refuses_dangerous_syscalls",
        "test_cannot_read_host_files_outside_its_binds",
        "test_cannot_write_to_any_bound_host_path",
        "test_cannot_reach_the_hosts_loopback_or_any_network",
        "test_time_limit_stops_the_job",
        "test_storage_limit_of_the_memory_backed_work_dir",
    )
)
globals().update(
    _root_mode_tests(
        "test_sandbox_hardening",
        "test_clone_into_new_namespaces_is_refused",
        "test_fork_threads_and_subprocess_still_work",
        "test_socket_families_a_job_has_no_use_for_are_refused",
        "test_socket_buffers_count_against_the_memory_limit",
    )
)
