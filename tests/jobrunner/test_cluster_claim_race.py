"""A node that claims a job its own submit checked (`jobrunner.cluster.intake` and `.claiming`):
the submit, with a slot free when the upload came, keeps the checked files until its answer is
out; a slot freed meanwhile claims the job by itself. That claim must run the job, whether it
comes before the answer (it takes the checked files) or while they are being removed after it (it
waits, then unpacks the upload anew): the same place on disk either way. Before, it unpacked into
the checked files' place, failed on the directory already there, and left the job claimed by a
live node for good (found by `make bench`'s cluster run: one job of about 300).

The real cluster app and store (a real redis-server), in this process, with the fake runner
(`support.fakerunner`); the interleaving is forced by wrapping the node's own steps, no timing."""

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobrunner.cluster.service import ClusterService
from support.fakerunner import FakeRunner, serving, steps
from support.jobclient import tarball

pytestmark = pytest.mark.timeout(120)
MANIFEST = {"entrypoint": "main.json", "interpreter": "python"}
FILES = {"main.json": steps({"file": "out.txt", "data": "ran"}), "data.txt": "kept"}


def run(redis_server, tmp_path: Path, scenario: Callable[..., Awaitable[None]]) -> None:
    """`scenario(url, node, client)` against one node of one slot, whose checked uploads wait
    on a staging directory as on the sandbox's tmpfs."""
    redis_server.cli("FLUSHALL")
    runner = FakeRunner()
    runner.staging = tmp_path / "staging"
    runner.staging.mkdir()

    async def main() -> None:
        async with (
            serving(
                tmp_path / "node",
                runner,
                cluster=redis_server.url,
                concurrency=1,
                start_after=60.0,
            ) as served,
            httpx.AsyncClient(timeout=30) as client,
        ):
            assert isinstance(served.service, ClusterService)
            await scenario(served.url, served.service, client)

    asyncio.run(main())


async def submitted(client: httpx.AsyncClient, url: str) -> str:
    answer = await client.post(
        f"{url}/submit",
        files={"files": ("job.tar.gz", tarball(FILES))},
        data={"manifest": json.dumps(MANIFEST)},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["job_id"]


async def final(client: httpx.AsyncClient, url: str, job_id: str) -> dict[str, Any]:
    """The job's final record; its last record as it stands if it has none within a minute (a
    job left claimed does not end)."""
    record: dict[str, Any] = {}
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(60):
            while record.get("status") not in ("completed", "failed"):
                answer = await client.get(f"{url}/status/{job_id}", params={"wait": "20"})
                record = answer.json()
    return record


async def downloaded(client: httpx.AsyncClient, url: str, job_id: str) -> bytes:
    return (await client.get(f"{url}/download/{job_id}/out.txt")).content


def test_a_claim_before_the_answer_runs_the_checked_files(redis_server, tmp_path):
    """The upload came with the slot free; by the time it is queued the slot is taken (here:
    held by the test), so the submit claims nothing; the slot frees and the node's claimer
    claims the job before the submit has answered."""

    async def scenario(url: str, node: ClusterService, client: httpx.AsyncClient) -> None:
        queue = node._queue
        claimed = asyncio.Event()
        took = node._took

        def noting(job: Any) -> None:
            claimed.set()
            took(job)

        async def slot_taken_meanwhile(job: Any, *args: Any) -> int:
            node.taken += 1  # another job took the slot while the upload was checked
            position = await queue(job, *args)
            node._give_slot_back()  # ... and ended: the claimer takes the next job
            await claimed.wait()  # before this submit answers
            return position

        node._queue = slot_taken_meanwhile  # type: ignore[method-assign]
        node._took = noting  # type: ignore[method-assign]
        job_id = await submitted(client, url)
        record = await final(client, url, job_id)
        assert (record["status"], record["failure"]) == ("completed", None), record
        assert await downloaded(client, url, job_id) == b"ran"

    run(redis_server, tmp_path, scenario)


def test_a_claim_while_the_checked_files_are_removed_waits_for_them(redis_server, tmp_path):
    """The submit answered (its files are being removed, held here until the job is claimed);
    then the slot frees and the node claims the job: it unpacks the upload once they are gone."""

    async def scenario(url: str, node: ClusterService, client: httpx.AsyncClient) -> None:
        queue = node._queue
        remove = node._remove_files
        claimed = threading.Event()
        removing = threading.Event()
        took = node._took

        def noting(job: Any) -> None:
            claimed.set()
            took(job)

        def held_removal(job_id: str) -> None:
            removing.set()
            claimed.wait(30)  # the claim comes while the checked files are still there
            remove(job_id)

        async def slot_taken_meanwhile(job: Any, *args: Any) -> int:
            node.taken += 1  # another job took the slot while the upload was checked
            try:
                return await queue(job, *args)
            finally:  # ... and ends once this submit has answered
                asyncio.get_running_loop().call_soon(node._give_slot_back)

        node._queue = slot_taken_meanwhile  # type: ignore[method-assign]
        node._remove_files = held_removal  # type: ignore[method-assign]
        node._took = noting  # type: ignore[method-assign]
        job_id = await submitted(client, url)
        record = await final(client, url, job_id)
        assert removing.is_set() and claimed.is_set()
        assert (record["status"], record["failure"]) == ("completed", None), record
        assert await downloaded(client, url, job_id) == b"ran"

    run(redis_server, tmp_path, scenario)


def test_a_claimed_job_whose_handling_fails_before_it_starts_is_settled_failed(
    redis_server, tmp_path
):
    """Whatever fails between the claim and the job (here: unpacking it raises), the job does not
    stay claimed by a live node: its record says `failed`, `sandbox_error`, signed by the node."""

    async def scenario(url: str, node: ClusterService, client: httpx.AsyncClient) -> None:
        async def broken(*args: Any) -> None:
            raise RuntimeError("unpacking broke")

        node._unpack_claimed = broken  # type: ignore[method-assign]
        node.taken += 1  # no free slot when the upload comes: only the claimer will claim it
        job_id = await submitted(client, url)
        node._give_slot_back()
        record = await final(client, url, job_id)
        assert (record["status"], record["failure"]) == ("failed", "sandbox_error"), record
        assert record["worker_metadata"]["signature"]

    run(redis_server, tmp_path, scenario)
