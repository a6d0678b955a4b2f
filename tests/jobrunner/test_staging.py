"""Where a queued job's upload waits: the runner's staging tmpfs (RAM), or the disk when it is full.

The real app on a loopback server with the fake runner (`support.fakerunner`), whose `staging` is
a directory of the test's (a tmpfs of 64 KiB for the fallback, which needs root to mount); the
real sandbox's staging tmpfs is tested with real jobs in `test_sandbox_staging.py`.
"""

import asyncio
import hashlib
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from support import require
from support.fakerunner import FakeRunner, Served, serving, steps
from support.jobclient import tarball
from support.servers import wait_until_async

MANIFEST = {"entrypoint": "main.json", "interpreter": "python"}


async def submit(client: httpx.AsyncClient, served: Served, files: dict, **manifest) -> str:
    answer = await client.post(
        f"{served.url}/submit",
        files={"files": ("job.tar.gz", tarball(files))},
        data={"manifest": json.dumps({**MANIFEST, **manifest})},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["job_id"]


def run(
    scenario: Callable[[Served, httpx.AsyncClient, FakeRunner], Awaitable[None]],
    tmp_path: Path,
    runner: FakeRunner | None = None,
    **options: object,
) -> None:
    """`scenario` against the app served with `runner` (a fake one by default) whose staging is
    `tmp_path / "staging"` (made here unless it exists: a test's own mount)."""
    runner = runner or FakeRunner()
    runner.staging = tmp_path / "staging"
    runner.staging.mkdir(exist_ok=True)

    async def main() -> None:
        async with (
            serving(tmp_path / "state", runner=runner, **options) as served,
            httpx.AsyncClient(timeout=30) as client,
        ):
            await scenario(served, client, runner)

    asyncio.run(main())


async def finished(client: httpx.AsyncClient, served: Served, job_id: str) -> dict:
    answer = await client.get(f"{served.url}/status/{job_id}", params={"wait": "30"})
    record = answer.json()
    assert record["status"] in ("completed", "failed"), record
    return record


def test_a_queued_upload_waits_in_staging_and_never_touches_the_disk(tmp_path):
    async def scenario(served: Served, client: httpx.AsyncClient, runner: FakeRunner) -> None:
        jobs = served.service.jobs_dir
        blocker = await submit(client, served, {"main.json": steps({"wait": "go"})})
        assert await wait_until_async(lambda: blocker in runner.started)
        queued = await submit(
            client,
            served,
            {"main.json": steps({"stdin": True}, {"file": "out.txt", "data": "made"})},
            stdin="fed\n",
        )
        # Queued: its inputs and its stdin are on the staging tmpfs, nothing on the disk.
        staged = runner.staging / queued
        assert (staged / "inputs" / "main.json").is_file()
        assert (staged / "stdin").read_bytes() == b"fed\n"
        assert (staged / "stdin").stat().st_mode & 0o777 == 0o600
        assert not (jobs / queued).exists()
        runner.open("go")
        record = await finished(client, served, queued)
        assert record["status"] == "completed", record
        # Once running, the runner took the files: the RAM is free again.
        assert not staged.exists()
        log = await client.get(f"{served.url}/logs/{queued}")
        assert log.content == b"fed\n"
        # Its output went to its dir on the disk, made only now, and is downloaded from there.
        download = await client.get(f"{served.url}/download/{queued}/out.txt")
        assert download.status_code == 200 and download.content == b"made"
        assert (jobs / queued / "outputs" / "out.txt").is_file()
        assert list(runner.staging.iterdir()) == []

    run(scenario, tmp_path, concurrency=1)


def test_a_job_cancelled_while_queued_frees_its_staged_upload(tmp_path):
    async def scenario(served: Served, client: httpx.AsyncClient, runner: FakeRunner) -> None:
        blocker = await submit(client, served, {"main.json": steps({"wait": "go"})})
        assert await wait_until_async(lambda: blocker in runner.started)
        queued = await submit(client, served, {"main.json": steps({"out": "never\n"})})
        assert (runner.staging / queued).is_dir()
        answer = await client.delete(f"{served.url}/jobs/{queued}")
        assert answer.json()["failure"] == "cancelled", answer.text
        assert await wait_until_async(lambda: not (runner.staging / queued).exists())
        assert queued not in runner.started

    run(scenario, tmp_path, concurrency=1)


def test_a_refused_upload_leaves_nothing_in_staging_or_on_disk(tmp_path):
    async def scenario(served: Served, client: httpx.AsyncClient, runner: FakeRunner) -> None:
        answer = await client.post(
            f"{served.url}/submit",
            files={"files": ("job.tar.gz", tarball({"other.txt": "x"}))},
            data={"manifest": json.dumps(MANIFEST)},
        )
        assert answer.status_code == 400, answer.text
        assert "entrypoint not found" in answer.json()["details"]
        assert list(runner.staging.iterdir()) == []
        assert list(served.service.jobs_dir.iterdir()) == []

    run(scenario, tmp_path)


class Recording(FakeRunner):
    """The fake runner, noting the digest of `big.bin` as the job found it in its inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, str] = {}

    async def run(self, spec, *args, **kwargs):  # type: ignore[no-untyped-def]
        if (spec.inputs_dir / "big.bin").exists():
            data = (spec.inputs_dir / "big.bin").read_bytes()
            self.seen[spec.job_id] = hashlib.sha256(data).hexdigest()
        return await super().run(spec, *args, **kwargs)


def test_an_upload_too_big_for_what_is_left_of_staging_waits_on_the_disk(tmp_path):
    require(os.geteuid() == 0, "mounting a small tmpfs as the staging area needs root")
    recording = Recording()
    staging = tmp_path / "staging"
    staging.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(staging)], check=True
    )
    big = os.urandom(200_000)  # 200 KB that do not compress: more than the 64 KiB there

    async def scenario(served: Served, client: httpx.AsyncClient, runner: FakeRunner) -> None:
        jobs = served.service.jobs_dir
        blocker = await submit(client, served, {"main.json": steps({"wait": "go"})})
        assert await wait_until_async(lambda: blocker in runner.started)
        small = await submit(client, served, {"main.json": steps(), "big.bin": b"s"})
        large = await submit(client, served, {"main.json": steps(), "big.bin": big})
        # The small one fits in the tmpfs; the large one was begun there, did not fit, and
        # was unpacked again into its dir on the disk, none of it left in the tmpfs.
        assert (runner.staging / small / "inputs" / "big.bin").is_file()
        assert not (runner.staging / large).exists()
        assert (jobs / large / "inputs" / "big.bin").read_bytes() == big
        assert not (jobs / small).exists()
        runner.open("go")
        for job_id in (small, large):
            assert (await finished(client, served, job_id))["status"] == "completed"
        assert recording.seen[large] == hashlib.sha256(big).hexdigest()
        assert recording.seen[small] == hashlib.sha256(b"s").hexdigest()
        record = served.service.jobs[large]
        assert [(f.path, f.size) for f in record.inputs] == [
            ("main.json", len(steps())),
            ("big.bin", len(big)),
        ]
        assert list(runner.staging.iterdir()) == []
        # One more waiting on the disk, cancelled while queued: its files go at once too.
        blocker = await submit(client, served, {"main.json": steps({"wait": "again"})})
        assert await wait_until_async(lambda: blocker in runner.started)
        dropped = await submit(client, served, {"main.json": steps(), "big.bin": big})
        assert (jobs / dropped / "inputs" / "big.bin").is_file()
        answer = await client.delete(f"{served.url}/jobs/{dropped}")
        assert answer.json()["failure"] == "cancelled", answer.text
        assert await wait_until_async(lambda: not (jobs / dropped).exists())
        runner.open("again")

    try:
        run(scenario, tmp_path, recording, concurrency=1)
    finally:
        subprocess.run(["umount", "-l", str(staging)], check=False)
