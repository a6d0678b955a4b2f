"""`make test-container`'s client: wait for the containerised server, run one job, check it.

Usage: container_job.py URL. Exit status 0 when the job completed with the expected output."""

import io
import json
import sys
import tarfile
import time

import httpx

DEADLINE = 300.0  # the server's start (it builds its default environment) and the job


def _tarball() -> bytes:
    data = b"import os\nprint('hello from', os.getuid())\n"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("main.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def main(url: str) -> int:
    deadline = time.monotonic() + DEADLINE
    while True:  # until the server answers
        try:
            httpx.get(f"{url}/environments", timeout=5)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                print("container-test: the server never answered", file=sys.stderr)
                return 1
            time.sleep(1)
    response = httpx.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", _tarball())},
        data={"manifest": json.dumps({"entrypoint": "main.py"})},
        timeout=30,
    )
    response.raise_for_status()
    job_id = response.json()["job_id"]
    while time.monotonic() < deadline:
        record = httpx.get(f"{url}/status/{job_id}", timeout=10).json()
        if record["status"] in ("completed", "failed"):
            log = httpx.get(f"{url}/logs/{job_id}", timeout=10).text
            print(f"container-test: job {record['status']}: {log.strip()}")
            return 0 if record["status"] == "completed" and log == "hello from 65534\n" else 1
        time.sleep(0.5)
    print("container-test: the job did not finish", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
