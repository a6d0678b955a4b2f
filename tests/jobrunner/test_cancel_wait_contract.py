"""Cancel, long polls and stdin in seconds: the real app on a real loopback server in this process,
over real HTTP, with the fake runner (tests/support/fakerunner.py) instead of nsjail. The same
features on a real sandbox: test_cancel_wait_stdin.py."""

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from jobrunner.client import Client
from jobrunner.wire import StatusRecord
from support.fakerunner import Served, serving, steps
from support.jobclient import tarball
from support.servers import wait_until_async

MANIFEST = {"entrypoint": "main.json", "interpreter": "python"}


def run(scenario: Callable[[Served], Awaitable[None]], tmp_path: Path, **options: object) -> None:
    async def main() -> None:
        async with serving(tmp_path / "state", **options) as served:
            await scenario(served)

    asyncio.run(main())


async def submit(client: httpx.AsyncClient, served: Served, job: str, **manifest: object) -> dict:
    answer = await client.post(
        f"{served.url}/submit",
        files={"files": ("job.tar.gz", tarball({"main.json": job}))},
        data={"manifest": json.dumps({**MANIFEST, **manifest})},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_running_job_is_cancelled_without_its_outputs(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            job = await submit(
                client, served, steps({"file": "out.txt", "data": "x"}, {"wait": "never"})
            )
            assert await wait_until_async(lambda: job["job_id"] in served.runner.started)
            answer = await client.delete(f"{served.url}/jobs/{job['job_id']}")
            assert answer.status_code == 200, answer.text
            record = answer.json()
            assert (record["status"], record["failure"]) == ("failed", "cancelled")
            assert record["output_files"] == {}
            assert record["execution_metadata"]["memory_peak_bytes"] == 2_000_000  # measured
            assert served.service.limiter.verdict("127.0.0.1").active == 0

    run(scenario, tmp_path)


def test_a_long_poll_is_woken_by_the_finish(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=90) as client:
            job = await submit(client, served, steps({"wait": "go"}, {"out": "done\n"}))
            poll = asyncio.ensure_future(
                client.get(f"{served.url}/status/{job['job_id']}", params={"wait": "60"})
            )
            # The poll is waiting once it holds the client's stream.
            assert await wait_until_async(lambda: _streams(served) == 1)
            assert not poll.done()
            served.runner.open("go")
            answer = await poll
            assert answer.status_code == 200 and answer.json()["status"] == "completed"
            assert _streams(served) == 0

    run(scenario, tmp_path)


def test_a_long_poll_whose_client_leaves_frees_its_slot_at_once(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            job = await submit(client, served, steps({"wait": "never"}))
            host, port = served.url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(
                    f"GET /status/{job['job_id']}?wait=60 HTTP/1.1\r\nHost: x\r\n\r\n".encode()
                )
                assert await wait_until_async(lambda: _streams(served) == 1)
            # Gone: the slot comes back long before the minute is up (the wait is a condition).
            assert await wait_until_async(lambda: _streams(served) == 0, timeout=30)
            second = await client.get(
                f"{served.url}/status/{job['job_id']}", params={"wait": "0.1"}
            )
            assert second.status_code == 200 and second.json()["status"] == "running"

    run(scenario, tmp_path, rate_streams=1)


def test_stdin_is_kept_out_of_memory_until_the_job_runs(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            text = "a\x00b é\n"
            job = await submit(client, served, steps({"stdin": True}), stdin=text)
            held = served.service.jobs[job["job_id"]]
            assert held.manifest.stdin == "" and held.stdin
            while not held.finished:
                await asyncio.wait_for(held.done.wait(), 30)
            log = await client.get(f"{served.url}/logs/{job['job_id']}")
            assert log.content == text.encode()
            stdin_file = held.directory / "stdin"
            assert stdin_file.stat().st_mode & 0o777 == 0o600

    run(scenario, tmp_path)


def _streams(served: Served) -> int:
    return served.service.limiter.open_streams("127.0.0.1")


def test_the_client_waits_by_long_polls_and_cancels(tmp_path):
    from jobrunner.client import JobrunnerError

    async def scenario(served: Served) -> None:
        async with Client(served.url) as client:
            job = await client.submit(
                tarball=tarball({"main.json": steps({"out": "x" * 1000}, {"wait": "go"})}),
                entrypoint="main.json",
                interpreter="python",
            )
            held = served.service.jobs[job.job_id]
            waiting = asyncio.ensure_future(client.wait(job.job_id))
            # One request held open by the server: no log stream read to its end, no polling.
            assert await wait_until_async(lambda: _streams(served) == 1)
            assert not held.log.followers and not waiting.done()
            served.runner.open("go")
            record = await waiting
            assert record.status == "completed" and record.job_id == job.job_id

            second = await client.submit(
                tarball=tarball({"main.json": steps({"wait": "never"})}),
                entrypoint="main.json",
                interpreter="python",
                stdin="for the job",
            )
            assert await wait_until_async(lambda: second.job_id in served.runner.started)
            assert (await client.status(second.job_id, wait=0.1)).status == "running"
            cancelled = await client.cancel(second.job_id)
            assert (cancelled.status, cancelled.failure) == ("failed", "cancelled")
            client.check(cancelled)  # signed, for this job, with the hash its submit announced
            try:
                await client.cancel(second.job_id)
            except JobrunnerError as error:
                assert error.status == 409 and error.error == "Job already finished"
            else:
                raise AssertionError("a second cancel must be refused")

    run(scenario, tmp_path)


# --- POST /submit?wait=S: submit and wait in one request ---------------------------------------


async def _post(client: httpx.AsyncClient, served: Served, job: str, **params: str):
    return await client.post(
        f"{served.url}/submit",
        params=params,
        files={"files": ("job.tar.gz", tarball({"main.json": job}))},
        data={"manifest": json.dumps(MANIFEST)},
    )


def test_submit_with_wait_answers_with_the_finished_record(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=90) as client:
            posting = asyncio.ensure_future(
                _post(client, served, steps({"wait": "go"}, {"out": "done\n"}), wait="60")
            )
            # The job runs while the request waits, holding one of the client's streams.
            assert await wait_until_async(lambda: bool(served.runner.started))
            assert _streams(served) == 1 and not posting.done()
            served.runner.open("go")
            answer = await posting
            assert answer.status_code == 200, answer.text
            record = answer.json()
            assert record["status"] == "completed" and record["finished_at"]
            assert record["job_id"] == served.runner.started[0]
            assert record == (await client.get(f"{served.url}/status/{record['job_id']}")).json()
            assert _streams(served) == 0

    run(scenario, tmp_path)


def test_submit_with_wait_answers_with_the_record_as_it_is_after_its_time(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await _post(client, served, steps({"wait": "never"}), wait="0.2")
            assert answer.status_code == 200, answer.text
            record = answer.json()
            # The job's id, so the client can go on waiting (or cancel); the job runs on.
            assert record["status"] in ("queued", "running") and record["finished_at"] is None
            assert record["job_id"] in served.runner.started or record["status"] == "queued"
            assert _streams(served) == 0
            gone = await client.delete(f"{served.url}/jobs/{record['job_id']}")
            assert gone.status_code == 200 and gone.json()["failure"] == "cancelled"

    run(scenario, tmp_path)


def test_submit_with_a_bad_wait_or_no_stream_left_queues_nothing(tmp_path):
    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            for bad in ("0", "61", "abc", ""):
                answer = await _post(client, served, steps({"out": "x"}), wait=bad)
                assert answer.status_code == 400, (bad, answer.text)
                assert answer.json()["error"] == "Invalid parameter"
            held = await submit(client, served, steps({"wait": "never"}))
            poll = asyncio.ensure_future(
                client.get(f"{served.url}/status/{held['job_id']}", params={"wait": "60"})
            )
            assert await wait_until_async(lambda: _streams(served) == 1)
            # The client's one stream is taken: refused before the upload, so no job is left
            # queued whose id the client never learnt.
            refused = await _post(client, served, steps({"out": "x"}), wait="60")
            assert refused.status_code == 429 and "streams" in refused.json()["reason"]
            assert list(served.service.jobs) == [held["job_id"]]
            assert served.service.limiter.verdict("127.0.0.1").active == 1
            await client.delete(f"{served.url}/jobs/{held['job_id']}")
            assert (await poll).json()["failure"] == "cancelled"

    run(scenario, tmp_path, rate_streams=1, rate_concurrent=5)


def test_the_client_submits_and_waits_in_one_request(tmp_path):
    async def scenario(served: Served) -> None:
        async with Client(served.url) as client:
            waiting = _held_submit_and_wait(client, "both\n")
            # The submit's own request holds the stream: no second request for the wait.
            assert await wait_until_async(lambda: bool(served.runner.started))
            assert _streams(served) == 1 and not waiting.done()
            served.runner.open("go")
            record = await waiting
            assert record.status == "completed"
            assert record.job_id == served.runner.started[0]
            # Its hash stands for the announcement: later records of the job must carry it.
            assert client.submitted[record.job_id] == record.job_hash
            client.check(record)  # signed by the server

    run(scenario, tmp_path)


def test_the_client_submits_and_waits_with_a_server_older_than_the_wait(tmp_path):
    """A server that ignores `wait` on a submit (one older than it) answers at once with the
    job's id: the client goes on with long polls instead of failing on the answer's shape."""

    def older(app):
        async def without_submit_wait(scope, receive, send):
            if scope["type"] == "http" and scope["path"] == "/submit":
                scope = {**scope, "query_string": b""}
            await app(scope, receive, send)

        return without_submit_wait

    async def scenario(served: Served) -> None:
        async with Client(served.url) as client:
            waiting = _held_submit_and_wait(client, "late\n")
            # The submit was answered; the client now waits by a long poll of its own.
            assert await wait_until_async(lambda: bool(served.runner.started))
            assert await wait_until_async(lambda: _streams(served) == 1)
            served.runner.open("go")
            record = await waiting
            assert record.status == "completed"
            client.check(record)  # signed, with the hash the (older) submit announced

    run(scenario, tmp_path, wrap=older)


def _held_submit_and_wait(client: Client, out: str) -> asyncio.Future[StatusRecord]:
    """`Client.submit_and_wait`, started, of a job that prints `out` once the gate "go" opens."""
    return asyncio.ensure_future(
        client.submit_and_wait(
            tarball=tarball({"main.json": steps({"wait": "go"}, {"out": out})}),
            entrypoint="main.json",
            interpreter="python",
        )
    )
