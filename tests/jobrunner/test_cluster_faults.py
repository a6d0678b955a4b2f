"""Faults of a cluster (real nodes, real nsjail, real redis-server): a node killed mid-job, a
front end killed, the store stopped and started again, a rolling restart under load."""

import asyncio
import signal
import subprocess
import threading
import time

import httpx
import pytest

from jobrunner.sandbox.layout import Layout
from support.clusternodes import let_go, running_on, status, submit_held
from support.jobclient import HELD, submit, submit_in_background, wait_finished, worker_key
from support.servers import wait_until

pytestmark = pytest.mark.timeout(600)
QUICK = {"main.py": "print('quick')"}


def test_sigkill_mid_job_is_worker_lost_and_queued_jobs_finish_elsewhere(start_node, state_dir):
    doomed = start_node(concurrency=1)
    front = start_node(concurrency=0)
    lost = submit_held(front.url)
    assert wait_until(lambda: status(front.url, lost)["status"] == "running", timeout=60)
    queued = [
        submit(front.url, QUICK, {"entrypoint": "main.py"}).json()["job_id"] for _ in range(3)
    ]
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.wait()
    killed_at = time.monotonic()
    record = wait_finished(front.url, lost, timeout=60)
    observed = time.monotonic() - killed_at
    assert (record["status"], record["failure"]) == ("failed", "worker_lost")
    assert record["worker_metadata"]["worker_id"] == worker_key(front.url)  # the front signed
    print(f"worker_lost {observed:.1f} s after SIGKILL (--lost-after 3)")
    # Its live log ends, from any node.
    assert "held" in httpx.get(f"{front.url}/logs/{lost}").text
    survivor = start_node(concurrency=1)
    for job in queued:
        done = wait_finished(front.url, job)
        assert done["status"] == "completed", done
        assert done["worker_metadata"]["worker_id"] == worker_key(survivor.url)


def test_killing_a_front_end_loses_nothing(start_node, state_dir):
    worker = start_node(concurrency=1)
    doomed, other = start_node(concurrency=0), start_node(concurrency=0)
    states = [state_dir / f"s{n}" for n in range(3)]
    first = submit_held(doomed.url)
    jobs = [submit(doomed.url, QUICK, {"entrypoint": "main.py"}).json()["job_id"] for _ in range(3)]
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.wait()
    let_go(other.url, states, first)
    for job in [first, *jobs]:
        record = wait_finished(other.url, job)
        assert record["status"] == "completed", record
        assert record["worker_metadata"]["worker_id"] == worker_key(worker.url)


ENDPOINTS = ("/", "/status/{job}", "/logs/{job}", "/outputs/{job}", "/stats", "/health")


def unavailable(url: str, job: str) -> bool:
    for path in ENDPOINTS:
        answer = httpx.get(url + path.format(job=job), timeout=10)
        if answer.status_code != 503 or answer.json()["error"] != "Cluster unavailable":
            return False
    refused = submit(url, QUICK, {"entrypoint": "main.py"})
    return refused.status_code == 503 and refused.json()["error"] == "Cluster unavailable"


def statuses(url: str, job: str, count: int) -> list[int]:
    """The answers to `count` status requests sent at once (so they take several of the node's
    connections to the store)."""

    async def ask() -> list[int]:
        async with httpx.AsyncClient(timeout=30) as client:
            answers = await asyncio.gather(
                *(client.get(f"{url}/status/{job}") for _ in range(count))
            )
        return [answer.status_code for answer in answers]

    return asyncio.run(ask())


def test_the_store_stopped_gives_503_then_every_node_recovers_by_itself(
    start_node, redis_server, state_dir
):
    worker = start_node(concurrency=1)
    front = start_node(concurrency=0)
    states = [state_dir / "s0", state_dir / "s1"]
    job = submit_held(front.url)
    assert wait_until(lambda: "held" in httpx.get(f"{front.url}/logs/{job}").text, timeout=60)
    redis_server.stop()
    for node in (worker, front):
        assert wait_until(lambda url=node.url: unavailable(url, job), timeout=10)
    # Each refusal comes at once once the outage is known (not after a client's timeout).
    started = time.monotonic()
    httpx.get(f"{front.url}/status/{job}", timeout=10)
    print(f"503 in {time.monotonic() - started:.3f} s")
    # The running job goes on, and finishes while the store is away.
    state = running_on(states, job)
    assert state is not None
    (Layout.for_state(state).work / job / "go").write_text("")
    assert wait_until(lambda: not (Layout.for_state(state).work / job).exists(), timeout=60)
    redis_server.start()
    for node in (worker, front):  # by themselves: nobody restarts them
        assert wait_until(lambda url=node.url: httpx.get(f"{url}/health").status_code == 200)
    record = wait_finished(front.url, job, timeout=60)
    assert record["status"] == "completed", record
    assert httpx.get(f"{front.url}/logs/{job}").text == "held\nreleased\n"
    # Back means back: no request meets a connection made before the restart (each such
    # connection answered one request with 503 Cluster unavailable).
    for node in (worker, front):
        assert set(statuses(node.url, job, 20)) == {200}
    again = submit(front.url, QUICK, {"entrypoint": "main.py"})
    assert again.status_code == 200, again.text
    assert wait_finished(worker.url, again.json()["job_id"])["status"] == "completed"


def test_a_rolling_restart_under_load_loses_no_result(start_node, state_dir):
    args = ("--shutdown-grace", "60")
    nodes = [start_node(*args, concurrency=1) for _ in range(3)]
    states = [state_dir / f"s{n}" for n in range(3)]
    code = "import time\ntime.sleep(1)\nopen('out.txt', 'w').write('result')\nprint('done')"
    manifest = {"entrypoint": "main.py", "outputs": ["out.txt"]}
    jobs: list[str] = []
    collected: dict[str, str] = {}
    stop = threading.Event()

    def live_url() -> str:
        for node in nodes:
            if node.proc.poll() is None and node.url:
                try:
                    httpx.get(f"{node.url}/health", timeout=2)
                    return node.url
                except httpx.HTTPError:
                    continue
        raise AssertionError("no node answers")

    def client() -> None:
        """Submits a job now and then, and collects each finished job's output."""
        while not stop.is_set() or len(collected) < len(jobs):
            if not stop.is_set() and len(jobs) < 12:
                try:  # a node stopping meanwhile may cut the submit off: asked again later
                    answer = submit(live_url(), {"main.py": code}, manifest)
                except (httpx.HTTPError, AssertionError):
                    answer = None
                if answer is not None and answer.status_code == 200:
                    jobs.append(answer.json()["job_id"])
            for job in [j for j in jobs if j not in collected]:
                try:
                    url = live_url()
                    record = status(url, job)
                    if record["status"] in ("completed", "failed"):
                        got = httpx.get(f"{url}/download/{job}/out.txt", timeout=10)
                        collected[job] = f"{record['status']}:{got.status_code}:{got.text}"
                except (httpx.HTTPError, AssertionError):
                    pass
            time.sleep(0.1)

    worker = threading.Thread(target=client)
    worker.start()
    assert wait_until(lambda: len(jobs) >= 3, timeout=60)
    for n in range(3):
        old = nodes[n]
        old.terminate()
        try:
            old.wait(180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"node {n} did not stop within 180 s of SIGTERM:\n{old.output[-6000:]}")
        nodes[n] = start_node(*args, concurrency=1, state=states[n])
    stop.set()
    worker.join(300)
    assert len(jobs) >= 3
    assert {job: collected.get(job) for job in jobs} == dict.fromkeys(jobs, "completed:200:result")


def test_a_store_outage_during_submit_and_wait_still_names_the_job(
    start_node, redis_server, state_dir
):
    """`POST /submit?wait=S` at a front end: the job is queued, then the store goes away while
    the request waits. The answer is the acceptance (its `job_id`), not a 503 without it."""
    start_node(concurrency=1)
    front = start_node(concurrency=0)
    states = [state_dir / "s0", state_dir / "s1"]
    waiter, answers = submit_in_background(
        front.url, {"main.py": HELD}, {"entrypoint": "main.py"}, params={"wait": "60"}
    )
    try:
        # Running: its work dir is on the worker; the submit's request is still waiting.
        work = Layout.for_state(states[0]).work
        assert wait_until(lambda: any(work.iterdir()) if work.exists() else False, timeout=60)
        job = next(work.iterdir()).name
        assert not answers
        redis_server.stop()
        waiter.join(60)
        assert answers and answers[0].status_code == 200, answers and answers[0].text
        assert answers[0].json()["job_id"] == job
        (work / job / "go").write_text("")
    finally:
        if redis_server.proc is None or redis_server.proc.poll() is not None:
            redis_server.start()
        waiter.join(60)
    assert wait_until(lambda: httpx.get(f"{front.url}/health").status_code == 200, timeout=60)
    record = wait_finished(front.url, job, timeout=60)
    assert record["status"] == "completed", record
