"""The processes that start a jail (setpriv, the cgroup-entering `sh`, nsjail: one pid, exec'ed in
turn) run with an empty environment: none of the server's variables reach them, and the job's own
variables are still exactly those the jail sets (real server, real nsjail, as root)."""

import os
from pathlib import Path

from support.jobclient import GENEROUS, HELD, log_of, release, submit, wait_finished
from support.servers import wait_until

MARKER = "JOBRUNNER_TEST_SERVER_ONLY"


def _nsjail_children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "comm").read_text().strip()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == parent and command == "nsjail":
            found.append(int(entry.name))
    return found


def test_the_jail_is_started_without_the_servers_environment(start_server, state_dir):
    env = {**os.environ, MARKER: "secret", "LANG": "C.UTF-8"}
    server = start_server(*GENEROUS, env=env)
    code = f"import os\nprint('marker', {MARKER!r} in os.environ, flush=True)\n" + HELD
    job_id = submit(server.url, {"main.py": code}, {"entrypoint": "main.py"}).json()["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, job_id), timeout=60)
    try:
        children = _nsjail_children(server.proc.pid)
        assert len(children) == 1, children
        environ = Path(f"/proc/{children[0]}/environ").read_bytes().split(b"\0")
        names = {variable.partition(b"=")[0] for variable in environ if variable}
        assert names <= {b"PWD"}, environ  # (the shell's own: it exports its directory)
    finally:
        release(server.url, state_dir / "s0", job_id)
    record = wait_finished(server.url, job_id)
    assert record["status"] == "completed", record
    assert "marker False" in log_of(server.url, job_id)
