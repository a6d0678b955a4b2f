"""Client helpers for tests against a real jobrunner server."""

import io
import json
import os
import sys
import tarfile
import threading
import time
from pathlib import Path

import httpx

from support import require

JOBRUNNER = str(Path(sys.executable).with_name("jobrunner"))
GENEROUS = [
    "--rate-concurrent",
    "1000",
    "--rate-per-hour",
    "100000",
    "--rate-cpu-seconds",
    "100000",
    "--rate-streams",
    "1000",
]


def need_sandbox() -> None:
    require(os.geteuid() == 0, "the nsjail sandbox needs root (user namespaces, cgroups, tmpfs)")
    require(os.path.exists("/usr/bin/python3"), "Debian's /usr/bin/python3 (python3-venv)")


def mounted_at(path: Path) -> list[str]:
    """The filesystem types mounted exactly at `path` (per /proc/self/mountinfo), oldest first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(path):
            found.append(fields[fields.index("-") + 1])
    return found


def tarball(files: dict[str, str | bytes], mode: int = 0o644) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def submit(
    url: str, files: dict[str, str | bytes] | bytes, manifest: dict | str, **kwargs
) -> httpx.Response:
    body = files if isinstance(files, bytes) else tarball(files)
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    return httpx.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", body)},
        data={"manifest": text},
        timeout=30,
        **kwargs,
    )


def submit_in_background(
    url: str, files: dict[str, str | bytes], manifest: dict, **kwargs
) -> tuple[threading.Thread, list[httpx.Response]]:
    """`submit` in a thread of its own, started (a request that waits: `params={"wait": ..}`);
    its answer is put in the list when it comes. Join the thread before reading it."""
    answers: list[httpx.Response] = []
    waiter = threading.Thread(
        target=lambda: answers.append(submit(url, files, manifest, **kwargs)), daemon=True
    )
    waiter.start()
    return waiter, answers


def run_job(url: str, code: str, wait: float = 60, **manifest) -> dict:
    """Submit a Python job (main.py) and wait until it is finished; returns its status record."""
    response = submit(url, {"main.py": code}, {"entrypoint": "main.py", **manifest})
    assert response.status_code == 200, response.text
    return wait_finished(url, response.json()["job_id"], wait)


def wait_finished(url: str, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{url}/status/{job_id}").json()
        if record["status"] in ("completed", "failed"):
            return record
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def collect(url: str, job_id: str, timeout: float = 60) -> dict:
    """Read a job's final record and download every output, as a client collecting its result
    does: what a stopping server waits for before it exits. Returns the record."""
    record = wait_finished(url, job_id, timeout)
    for path in record["output_files"]:
        assert httpx.get(f"{url}/download/{job_id}/{path}", timeout=30).status_code == 200
    return record


# A job that runs until the test lets it go, so no test guesses how long it needs a job running.
HELD = (
    "import os, time\nprint('held', flush=True)\n"
    "while not os.path.exists('go'):\n    time.sleep(0.05)\nprint('released')\n"
)


# Forks until refused (at most `{tries}` times), printing how many children it had: the children
# wait until they are killed, so none ends during the loop (which would give its pid back and
# let the loop fork more), and the job completes only if they die with its jail.
FORK_BOMB = """
import os, signal
children = 0
try:
    for _ in range({tries}):
        if os.fork() == 0:
            signal.pause()
            os._exit(0)
        children += 1
except OSError as error:
    print("fork refused after", children, "children:", error.strerror, flush=True)
os._exit(0)
"""


def release(url: str, state: Path, job_id: str) -> None:
    """Let a HELD job end: once it runs, the file it waits for goes into its work dir."""
    from jobrunner.sandbox.layout import Layout
    from support.servers import wait_until

    assert wait_until(lambda: "held" in log_of(url, job_id), timeout=60), job_id
    (Layout.for_state(state).work / job_id / "go").write_text("")


def log_of(url: str, job_id: str) -> str:
    return httpx.get(f"{url}/logs/{job_id}").text


def worker_key(url: str) -> str:
    return httpx.get(f"{url}/health").json()["worker_id"]


def write_allowlist(path: Path, workers: list[tuple[str, str]], capacity: int = 1) -> Path:
    """A pool's workers.toml for (url, public key) pairs."""
    path.write_text(
        "".join(
            f'[[worker]]\nurl = "{url}"\nkey = "{key}"\ncapacity = {capacity}\n\n'
            for url, key in workers
        )
    )
    return path
