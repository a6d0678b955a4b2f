"""Rolling restarts behind `jobrunner pool` lose no result (issue 24, item 5).

A worker stopped with SIGTERM used to exit as soon as its last job ended, before the pool had
read the job's record: a job its log called `completed` was reported `failed: worker_lost`, and
its outputs were gone. Now a draining worker takes no new job (its signed `/health` says
`draining`, answered 503), finishes the ones it has, and serves them until each was collected
(its final record read, its outputs downloaded) before it exits. Real pool, real workers, real
nsjail, on loopback.
"""

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
import httpx

from jobrunner.pool.workers import Worker, WorkerEntry, check_health
from jobrunner.signing import check_record
from support.jobclient import GENEROUS, HELD, log_of, release, submit, wait_finished, worker_key
from support.servers import wait_until

# HELD, then a result: it runs until the test lets it go (the test stops its worker meanwhile).
HELD_WITH_RESULT = HELD + "open('out.txt', 'w').write('the result')\n"


def test_a_worker_stopped_mid_job_hands_its_result_to_the_pool(cluster, state_dir):
    pool, (worker,) = cluster(workers=1, pool_args=GENEROUS)
    key = worker_key(worker.url)
    accepted = submit(
        pool.url,
        {"main.py": HELD_WITH_RESULT},
        {"entrypoint": "main.py", "outputs": ["out.txt"], "timeout": 120},
    )
    assert accepted.status_code == 200, accepted.text
    job = accepted.json()
    job_id = job["job_id"]
    assert wait_until(lambda: "held" in log_of(pool.url, job_id), timeout=60)

    worker.terminate()  # as `kill -TERM` does
    # It says it is draining (signed, 503 for load balancers) and takes no new job...
    assert wait_until(lambda: httpx.get(f"{worker.url}/health").status_code == 503, timeout=30)
    health = httpx.get(f"{worker.url}/health").json()
    assert (health["status"], health["worker_id"]) == ("draining", key)
    refused = submit(worker.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "30"
    # ...so the pool, whose only worker it is, has nowhere to send one.
    assert wait_until(lambda: httpx.get(f"{pool.url}/health").json()["status"] == "degraded")
    refused = submit(pool.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert refused.status_code == 503, refused.text

    release(worker.url, state_dir / "s0", job_id)  # the running job finishes
    record = wait_finished(pool.url, job_id)
    assert record["status"] == "completed", record
    assert record["failure"] is None
    check_record(record, key, job_id=job_id, job_hash=job["job_hash"])  # the worker's, signed
    assert set(record["output_files"]) == {"out.txt"}
    # The worker is still there for the download, through the pool; then it exits by itself.
    download = httpx.get(f"{pool.url}/download/{job_id}/out.txt", timeout=30)
    assert download.status_code == 200 and download.text == "the result"
    assert worker.wait(60) == 0
    assert "handed over: 0 finished job(s) left uncollected" in worker.output, worker.output
    # The pool keeps the checked record after the worker has gone.
    assert httpx.get(f"{pool.url}/status/{job_id}").json() == record


@dataclass
class Results:
    """What the client threads saw: one entry per job (its record and its downloaded output)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    jobs: dict[str, tuple[str, dict, str]] = field(default_factory=dict)  # id -> token, record, out
    problems: list[str] = field(default_factory=list)


JOB = "import sys, time\ntime.sleep(1)\nopen('out.txt', 'w').write(sys.argv[1])\n"


def _client(pool_url: str, name: str, stop: threading.Event, results: Results, most: int) -> None:
    """Submit a 1 s job, follow it to its end through the pool, download its output; again,
    until told to stop or `most` jobs are done. A refusal while workers restart (503: none is
    available yet) is asked again after its Retry-After, a bounded number of times."""
    for n in range(most):
        if stop.is_set():
            return
        token = f"{name}-{n}"
        reply = None
        for _ in range(120):
            reply = submit(pool_url, {"main.py": JOB}, {"entrypoint": "main.py", "args": [token]})
            if reply.status_code != 503:
                break
            time.sleep(min(1.0, float(reply.headers.get("retry-after", "1"))))
        assert reply is not None
        if reply.status_code != 200:
            with results.lock:
                results.problems.append(f"{token}: submit {reply.status_code} {reply.text}")
            return
        job_id = reply.json()["job_id"]
        try:
            record = _final(pool_url, job_id)
            out = httpx.get(f"{pool_url}/download/{job_id}/out.txt", timeout=30)
            text = out.text if out.status_code == 200 else f"download {out.status_code}"
        except Exception as error:  # recorded: the test reports every lost result
            with results.lock:
                results.problems.append(f"{token} ({job_id}): {error}")
            return
        with results.lock:
            results.jobs[job_id] = (token, record, text)


def _final(url: str, job_id: str) -> dict:
    """The job's final record through the pool; any answer that is not a record (the pool
    cannot reach the job's worker: `502`) is a lost result, raised with what it said."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        reply = httpx.get(f"{url}/status/{job_id}", timeout=30)
        if reply.status_code != 200:
            raise AssertionError(f"GET /status: {reply.status_code} {reply.text}")
        if reply.json()["status"] in ("completed", "failed"):
            return reply.json()
        time.sleep(0.05)
    raise AssertionError("not finished within 120 s")


def busy(url: str) -> bool:
    return bool(httpx.get(f"{url}/stats").json()["system"]["active_jobs"])


def _port(url: str) -> str:
    return str(urlsplit(url).port)


def test_restarting_every_worker_one_by_one_loses_no_result(cluster, start_server, state_dir):
    pool, workers = cluster(workers=2, pool_args=GENEROUS)
    keys = {worker_key(worker.url) for worker in workers}
    stop, results = threading.Event(), Results()
    clients = [
        threading.Thread(target=_client, args=(pool.url, f"c{n}", stop, results, 8))
        for n in range(2)
    ]
    for thread in clients:
        thread.start()
    try:
        for index, worker in enumerate(workers):
            # Stopped while it runs a job: the case that lost results. (A client that lost a
            # result has stopped: then there is no load left to wait for.)
            assert wait_until(
                lambda w=worker: busy(w.url) or not any(t.is_alive() for t in clients),
                timeout=120,
            ), worker.output
            assert not results.problems, results.problems
            stopped_at = len(pool.lines)
            worker.terminate()
            assert worker.wait(120) == 0, worker.output
            # The same worker again: its state dir (so its key) and its port (the allowlist's).
            again = start_server(
                *GENEROUS,
                "--concurrency",
                "1",
                "--trusted-proxy",
                "127.0.0.1",
                "--port",
                _port(worker.url),
                state=state_dir / f"s{index}",
            )
            assert again.url == worker.url
            started_at = len(pool.lines)
            # Back in the pool's rotation before the next worker stops: the pool said so (healthy
            # again after draining or being unreachable), or it has sent the new server a job (a
            # restart quick enough to fall between two checks is never seen as a change).
            assert wait_until(
                lambda u=worker.url, s=stopped_at, a=started_at: (
                    f"worker {u} is healthy" in "".join(pool.lines[s:])
                    or f"dispatched to {u}" in "".join(pool.lines[a:])
                    or not any(t.is_alive() for t in clients)
                ),
                timeout=60,
            ), pool.output
    finally:
        stop.set()
        for thread in clients:
            thread.join(300)
    assert not results.problems, results.problems
    assert len(results.jobs) >= 4, results.jobs
    for job_id, (token, record, out) in results.jobs.items():
        assert record["status"] == "completed", (token, record)
        assert record["worker_metadata"]["worker_id"] in keys, (token, record)
        check_record(record, record["worker_metadata"]["worker_id"], job_id=job_id)
        assert out == token, (token, out)


def test_a_worker_back_from_draining_between_two_checks_is_logged_healthy(start_server, caplog):
    """A restart quicker than the pool's check interval: the pool last saw the worker draining,
    and its next check finds it serving. It says the worker is healthy (it takes jobs again)
    instead of passing over the change in silence."""
    worker = start_server(*GENEROUS)
    entry = WorkerEntry(url=worker.url, key=worker_key(worker.url))
    seen = Worker(entry, healthy=True, problem="", draining=True)  # the last check's view

    async def check() -> None:
        async with aiohttp.ClientSession() as session:
            await check_health(session, seen)

    with caplog.at_level(logging.INFO, logger="jobrunner.pool"):
        asyncio.run(check())
    assert seen.available
    assert f"worker {worker.url.rstrip('/')} is healthy" in caplog.text
