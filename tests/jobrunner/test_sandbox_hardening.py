"""Hostile jobs against the sandbox (issue 10, items 8-13), tried for real in nsjail as root."""

import re
import signal
from pathlib import Path

import httpx

from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from support.jobclient import GENEROUS, log_of, run_job, submit
from support.servers import wait_until

LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def test_clone_into_new_namespaces_is_refused(server):
    # clone(CLONE_NEW*|SIGCHLD) straight through syscall(2), as a job bypassing libc would do.
    code = LIBC + (
        "for name, flag in [('user', 0x10000000), ('net', 0x40000000), ('ns', 0x20000),\n"
        "                   ('pid', 0x20000000), ('ipc', 0x08000000), ('uts', 0x04000000),\n"
        "                   ('cgroup', 0x02000000)]:\n"
        "    print(name, libc.syscall(56, flag | 17, 0, 0, 0, 0), ctypes.get_errno())\n"
        "print('clone3', libc.syscall(435, 0, 0), ctypes.get_errno())\n"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
    )
    record = run_job(server.url, code)
    lines = log_of(server.url, record["job_id"]).splitlines()
    refused = {line.split()[0]: line.split()[1:] for line in lines}
    for name in ("user", "net", "ns", "pid", "ipc", "uts", "cgroup", "unshare"):
        assert refused[name] == ["-1", "1"], lines  # EPERM: no child was created
    assert refused["clone3"] == ["-1", "38"], lines  # ENOSYS, so libc falls back to clone


def test_fork_threads_and_subprocess_still_work(server):
    code = """
import os, subprocess, threading
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
seen = []
threads = [threading.Thread(target=seen.append, args=(n,)) for n in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
print("threads", sorted(seen))
print("subprocess", subprocess.run(["/bin/sh", "-c", "echo $((6 * 7))"], capture_output=True,
      text=True, check=True).stdout.strip())
"""
    record = run_job(server.url, code)
    assert log_of(server.url, record["job_id"]).splitlines() == [
        "fork 7",
        "threads [0, 1, 2, 3]",
        "subprocess 42",
    ]
    assert record["status"] == "completed"


SOCKET_CODE = (
    LIBC
    + """
import socket
for name, family, kind, proto in [
    ("vsock", 40, socket.SOCK_STREAM, 0), ("packet", 17, socket.SOCK_RAW, 0),
    ("alg", 38, socket.SOCK_SEQPACKET, 0), ("netlink_netfilter", 16, socket.SOCK_RAW, 12),
    ("unix", 1, socket.SOCK_STREAM, 0), ("inet", 2, socket.SOCK_STREAM, 0),
    ("inet6", 10, socket.SOCK_STREAM, 0), ("netlink_route", 16, socket.SOCK_RAW, 0),
]:
    fd = libc.socket(family, kind, proto)
    print(name, "ok" if fd >= 0 else ctypes.get_errno())
a, b = socket.socketpair()
a.sendall(b"ping"); print("socketpair", b.recv(4).decode())
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
conn, _ = server.accept(); client.sendall(b"pong"); print("tcp", conn.recv(4).decode())
"""
)


def test_socket_families_a_job_has_no_use_for_are_refused(server):
    record = run_job(server.url, SOCKET_CODE)
    log = log_of(server.url, record["job_id"])
    results = dict(line.split() for line in log.splitlines())
    for family in ("vsock", "packet", "alg", "netlink_netfilter"):
        assert results[family] == "97", log  # EAFNOSUPPORT
    for family in ("unix", "inet", "inet6", "netlink_route"):
        assert results[family] == "ok", log
    assert results["socketpair"] == "ping" and results["tcp"] == "pong"


def test_socket_buffers_count_against_the_memory_limit(server):
    # Many loopback connections inside the job's network namespace, written to and never read:
    # the kernel buffers what is sent. A 64 MiB job must not be able to park more than that
    # (v1: half the limit for TCP plus the small minimum the kernel grants every socket).
    code = """
import socket
listener = socket.create_server(("127.0.0.1", 0), backlog=512)
chunk = b"x" * 65536
parked = 0
pairs = []
try:
    for _ in range(400):
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        pairs.append((client, server))
        client.setblocking(False)
        while True:
            try:
                parked += client.send(chunk)
            except (BlockingIOError, OSError):
                break
        if parked > 256 * 2**20:
            break
except OSError as error:
    print("stopped:", error.strerror)
print("parked", parked, flush=True)
"""
    record = run_job(server.url, code, memory_mb=64, timeout=60, wait=120)
    log = log_of(server.url, record["job_id"])
    if "parked " in log:
        parked = int(log.split("parked ")[1].split()[0])
        assert parked <= 64 * 2**20, f"{parked // 2**20} MiB parked in socket buffers"
    else:  # the kernel may kill the job outright when it charges the buffers
        assert record["failure"] == "memory_limit", log


def test_host_facts_are_hidden_from_the_job(server, state_dir):
    code = """
print(open("/proc/self/mountinfo").read())
print(open("/proc/self/cgroup").read())
print("cmdline", repr(open("/proc/cmdline").read()))
"""
    record = run_job(server.url, code)
    log = log_of(server.url, record["job_id"])
    assert str(state_dir) not in log and "jobrunner-test-" not in log
    assert "cmdline ''" in log
    cgroups = [line for line in log.splitlines() if line[:1].isdigit() and ":/" in line]
    assert cgroups, log
    for line in cgroups:  # rooted at the job's own cgroup: no host path, not even its own id
        assert re.fullmatch(r"(/\.\.)?/(NSJAIL\.\d+)?", line.split(":", 2)[2]), line


def _job_processes(token: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if token.encode() in (proc / "cmdline").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def _mounts_below(path: Path) -> list[str]:
    targets = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [target for target in targets if target.startswith(f"{path}/")]


def _start_long_job(url: str, token: str) -> str:
    code = "import time\nopen('alive.txt', 'w').write('x')\nprint('up', flush=True)\n"
    code += "time.sleep(120)\n"
    response = submit(url, {"main.py": code}, {"entrypoint": "main.py", "args": [token]})
    job_id = response.json()["job_id"]
    assert wait_until(lambda: log_of(url, job_id).startswith("up"), 30)
    return job_id


def _instance_cgroups(state: Path) -> list[Path]:
    cgroups = Cgroups.detect(Layout.for_state(state).instance)
    assert cgroups is not None
    return [
        mount / cgroups.parent
        for mount in cgroups.mounts.values()
        if (mount / cgroups.parent).is_dir()
    ]


def test_jobs_die_with_a_killed_server_and_a_restart_reaps_only_its_own(start_server, state_dir):
    victim_state, neighbour_state = state_dir / "victim", state_dir / "neighbour"
    victim = start_server(*GENEROUS, state=victim_state)
    neighbour = start_server(*GENEROUS, state=neighbour_state)
    neighbour_job = _start_long_job(neighbour.url, "neighbour-token")
    _start_long_job(victim.url, "victim-token")
    assert _job_processes("victim-token")

    victim_work = Layout.for_state(victim_state).work
    neighbour_files = Layout.for_state(neighbour_state).work / neighbour_job / "alive.txt"
    victim.proc.send_signal(signal.SIGKILL)  # as the OOM killer does: no cleanup at all
    victim.wait(10)
    assert wait_until(lambda: not _job_processes("victim-token"), 15), "the job outlived its server"
    assert _mounts_below(victim_work)  # its work dir is still mounted: the restart's to reap

    restarted = start_server(*GENEROUS, state=victim_state)  # the same instance comes back
    assert not _mounts_below(victim_work)
    record = run_job(restarted.url, "print('after restart')\n")
    assert record["status"] == "completed"
    assert log_of(restarted.url, record["job_id"]) == "after restart\n"
    # The neighbour (another instance on the same host) kept its running job and its files.
    assert _job_processes("neighbour-token") and neighbour_files.exists()
    assert httpx.get(f"{neighbour.url}/status/{neighbour_job}").json()["status"] == "running"
    restarted.stop()
    assert _job_processes("neighbour-token") and neighbour_files.exists()
    # A server that stops cleanly takes its cgroups with it; the neighbour keeps its own.
    assert not _instance_cgroups(victim_state)
    assert _instance_cgroups(neighbour_state)


def test_state_dir_below_a_parent_nobody_else_may_enter(start_server, state_dir):
    parent = state_dir / "private"
    parent.mkdir(mode=0o700)  # like /root, or what `mktemp -d` makes
    server = start_server(*GENEROUS, state=parent / "state")
    record = run_job(server.url, "import sys\nprint(sys.prefix)\n")
    assert record["status"] == "completed", log_of(server.url, record["job_id"])
    assert log_of(server.url, record["job_id"]) == "/venv\n"
    assert parent.stat().st_mode & 0o777 == 0o700  # not loosened by jobrunner
