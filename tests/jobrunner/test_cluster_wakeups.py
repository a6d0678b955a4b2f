"""A cluster's nodes wait for news instead of asking the store over and over: an idle node
waits for the queue's wake-up, a status request waiting for a job another node runs waits for
the job's end on the store's `done` channel. Counted with the store's own MONITOR, against the
nodes' heartbeats (twice a second), so that no count depends on how fast the machine is."""

import threading

import httpx
import pytest

from support.clusternodes import let_go, status, submit_held
from support.jobclient import run_job, worker_key
from support.servers import wait_until

pytestmark = pytest.mark.timeout(300)


def test_an_idle_node_waits_for_work_and_wakes_for_a_job(start_node, monitor):
    node = start_node(concurrency=1)
    key = worker_key(node.url)
    beats = monitor.count("SET", f"jr:alive:{key}")
    assert wait_until(lambda: monitor.count("SET", f"jr:alive:{key}") >= beats + 6, timeout=60)
    heartbeats = monitor.count("SET", f"jr:alive:{key}")
    claims = monitor.count("EVALSHA", key, node.url)
    # Idle, it claims once a second at most (its safety net), not every few milliseconds: a
    # heartbeat is every half second.
    assert claims <= heartbeats // 2 + 2, (claims, heartbeats)
    # And a job submitted now is taken by the waiting node.
    record = run_job(node.url, "print('woken')")
    assert record["status"] == "completed", record
    assert record["worker_metadata"]["worker_id"] == key


def test_a_status_wait_for_a_job_elsewhere_ends_with_the_job_without_polling(
    start_node, state_dir, monitor
):
    start_node(concurrency=1)
    front = start_node(concurrency=0)
    states = [state_dir / "s0", state_dir / "s1"]
    job = submit_held(front.url)
    assert wait_until(lambda: status(front.url, job)["status"] == "running", timeout=60)
    answers: list[dict] = []

    def wait() -> None:
        reply = httpx.get(f"{front.url}/status/{job}", params={"wait": "60"}, timeout=90)
        answers.append(reply.json())

    key = worker_key(front.url)
    waiter = threading.Thread(target=wait)
    # Counted from here: the reads of the status polls above (the job reads `queued` until its
    # start is written, `--start-after`) are not the waiting request's.
    read_before = monitor.count("HGETALL", f"jr:job:{job}")
    beats_before = monitor.count("SET", f"jr:alive:{key}")
    waiter.start()
    assert wait_until(lambda: monitor.count("HGETALL", f"jr:job:{job}") > read_before, timeout=30)
    beats = monitor.count("SET", f"jr:alive:{key}")
    assert wait_until(lambda: monitor.count("SET", f"jr:alive:{key}") >= beats + 6, timeout=60)
    heartbeats = monitor.count("SET", f"jr:alive:{key}") - beats_before
    reads = monitor.count("HGETALL", f"jr:job:{job}") - read_before
    let_go(front.url, states, job)
    waiter.join(60)
    assert answers and answers[0]["status"] == "completed", answers
    # The waiting request looked at the job about once a second (its safety net), not 20 times.
    assert reads <= heartbeats // 2 + 3, (reads, heartbeats)
