"""`jobrunner serve --cluster`: three real nodes (real nsjail) on one real redis-server. Jobs
spread over the nodes; any node answers for any job; the allowlist decides who takes jobs and
whose records are vouched for; the limits and the queue are the cluster's."""

import json
import subprocess
import threading

import httpx
import pytest

from jobrunner.signing import verify_record
from support.clusternodes import cluster_says, follow, let_go, status, submit_held
from support.jobclient import JOBRUNNER, run_job, submit, wait_finished, worker_key
from support.servers import wait_until

pytestmark = pytest.mark.timeout(300)


def test_jobs_spread_over_three_nodes_and_any_node_answers_for_any_job(start_node, state_dir):
    nodes = [start_node(concurrency=1) for _ in range(3)]
    states = [state_dir / f"s{n}" for n in range(3)]
    urls = [node.url for node in nodes]
    # Three jobs that hold their slot: each node has one slot, so each runs on another node.
    jobs = [submit_held(urls[n], outputs=["out.txt"]) for n in range(3)]
    assert wait_until(
        lambda: all(status(urls[0], job)["status"] == "running" for job in jobs), timeout=60
    )
    # A live log followed through a node that does not run the job.
    followed: dict[str, tuple] = {}
    watcher = threading.Thread(target=lambda: followed.update(log=follow(urls[2], jobs[0])))
    watcher.start()
    for job in jobs:
        let_go(urls[1], states, job)
    watcher.join(60)
    records = [wait_finished(urls[0], job) for job in jobs]
    runners = {record["worker_metadata"]["worker_id"] for record in records}
    assert runners == {worker_key(url) for url in urls}  # one job on each node
    assert followed["log"] == ("held\nreleased\n", 1000, "completed")
    for job, record in zip(jobs, records, strict=True):
        assert record["status"] == "completed", record
        verify_record(record, job_id=job)
        for url in urls:  # every node: the same record, the log, the outputs, the download
            assert status(url, job) == record
            assert httpx.get(f"{url}/logs/{job}").text == "held\nreleased\n"
            assert follow(url, job) == ("held\nreleased\n", 1000, "completed")
            listing = httpx.get(f"{url}/outputs/{job}").json()
            assert [entry["path"] for entry in listing["outputs"]] == []  # HELD writes none
    out = run_job(urls[0], "open('out.txt', 'w').write('made here')", outputs=["out.txt"])
    for url in urls:
        assert httpx.get(f"{url}/outputs/{out['job_id']}").json()["outputs"][0]["path"] == "out.txt"
        download = httpx.get(f"{url}/download/{out['job_id']}/out.txt")
        assert download.status_code == 200 and download.text == "made here"


def test_a_front_end_runs_nothing_and_the_queue_position_is_the_clusters(start_node, state_dir):
    front = start_node(concurrency=0)
    worker = start_node(concurrency=1)
    states = [state_dir / "s0", state_dir / "s1"]
    first = submit_held(front.url)
    assert wait_until(lambda: status(front.url, first)["status"] == "running", timeout=60)
    queued = [
        submit(front.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"}) for _ in range(2)
    ]
    assert [answer.json()["position"] for answer in queued] == [1, 2]
    second = queued[1].json()["job_id"]
    assert status(worker.url, second)["position"] == 2  # the same queue, asked of another node
    let_go(front.url, states, first)
    for answer in queued:
        record = wait_finished(front.url, answer.json()["job_id"])
        assert record["worker_metadata"]["worker_id"] == worker_key(worker.url)
    assert wait_finished(front.url, first)["worker_metadata"]["worker_id"] == worker_key(worker.url)


def test_submit_with_wait_through_a_front_end_answers_with_the_runners_record(start_node):
    front = start_node(concurrency=0)
    worker = start_node(concurrency=1)
    answer = submit(
        front.url,
        {"main.py": "print('one request')"},
        {"entrypoint": "main.py"},
        params={"wait": "60"},
    )
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert record["status"] == "completed"
    assert record["worker_metadata"]["worker_id"] == worker_key(worker.url)
    verify_record(record, job_id=record["job_id"])
    assert status(worker.url, record["job_id"]) == record
    bad = submit(front.url, {"main.py": "pass"}, {"entrypoint": "main.py"}, params={"wait": "x"})
    assert bad.status_code == 400 and bad.json()["error"] == "Invalid parameter"


def test_a_node_whose_key_is_not_allowed_takes_nothing(start_node, redis_server, state_dir):
    stranger = start_node(concurrency=1, allow=False)
    job = submit(stranger.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"}).json()["job_id"]
    shown = cluster_says(redis_server.url, "status")
    assert "NOT ALLOWED" in shown and "queue length: 1" in shown
    # It stays queued while only the stranger has slots (it asks for work many times a second).
    assert not wait_until(lambda: status(stranger.url, job)["status"] != "queued", timeout=2)
    allowed = start_node(concurrency=1)
    record = wait_finished(stranger.url, job)
    assert record["worker_metadata"]["worker_id"] == worker_key(allowed.url)
    listed = cluster_says(redis_server.url, "list").split()
    assert listed == [worker_key(allowed.url)]


def test_a_forged_record_is_reported_bad_signature(start_node, redis_server):
    nodes = [start_node(concurrency=1), start_node(concurrency=0)]
    record = run_job(nodes[0].url, "print('honest')")
    assert record["status"] == "completed"
    # Someone with write access to the store rewrites the finished record (a better exit code
    # is not what the node signed), and another one claims a result signed by a key not allowed.
    forged = {**record, "execution_metadata": {**record["execution_metadata"], "exit_code": 7}}
    key = f"jr:job:{record['job_id']}"
    # The node that ran the job answers `completed` from memory as soon as the job ends; its
    # record reaches the store a moment later (and would overwrite a forgery made before).
    assert wait_until(lambda: redis_server.cli("HGET", key, "state") == "finished", timeout=30)
    redis_server.cli("HSET", key, "record", json.dumps(forged))
    for node in nodes:
        seen = status(node.url, record["job_id"])
        assert (seen["status"], seen["failure"]) == ("failed", "bad_signature")
        assert seen["worker_metadata"]["worker_id"] == worker_key(node.url)
        verify_record(seen, trusted_worker_id=worker_key(node.url))
    redis_server.cli("HSET", key, "record", json.dumps(record))
    assert status(nodes[1].url, record["job_id"]) == record
    # Signed, but by a key taken off the list: no longer vouched for.
    subprocess.run(
        [JOBRUNNER, "cluster", "deny", worker_key(nodes[0].url), "--cluster", redis_server.url],
        check=True,
        capture_output=True,
    )
    assert wait_until(
        lambda: status(nodes[1].url, record["job_id"])["failure"] == "bad_signature", timeout=10
    )


def test_a_clients_limits_hold_across_two_front_ends(start_node, redis_server):
    limits = ("--rate-concurrent", "2", "--rate-per-hour", "3")
    fronts = [start_node(*limits, concurrency=0) for _ in range(2)]
    start_node(*limits, concurrency=1)
    first = submit_held(fronts[0].url)
    second = submit_held(fronts[1].url)
    third = submit(fronts[0].url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert third.status_code == 429, third.text
    assert "Concurrent job limit reached: 2/2" in third.json()["reason"]
    assert third.headers["Retry-After"] == "1"
    for url in (f.url for f in fronts):
        quota = httpx.get(f"{url}/stats").json()["your_quota"]
        assert (quota["active_jobs"], quota["can_submit"]) == (2, False)
    cancelled = httpx.delete(f"{fronts[1].url}/jobs/{first}").json()
    assert cancelled["failure"] == "cancelled"
    fourth = submit(fronts[1].url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert fourth.status_code == 200, fourth.text  # a slot came back, cluster-wide
    fifth = submit(fronts[0].url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert fifth.status_code == 429 and "Hourly limit reached: 3/3" in fifth.json()["reason"]
    httpx.delete(f"{fronts[0].url}/jobs/{second}")


def test_the_queue_is_bounded_cluster_wide(start_node):
    fronts = [start_node("--max-queue", "2", concurrency=0) for _ in range(2)]
    for url in (fronts[0].url, fronts[1].url):
        answer = submit(url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
        assert answer.status_code == 200, answer.text
    refused = submit(fronts[1].url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "10"
    assert "the queue is full (2 jobs)" in refused.json()["details"]


def test_cluster_commands_refuse_a_bad_key_and_an_unreachable_store(redis_server):
    bad = subprocess.run(
        [JOBRUNNER, "cluster", "allow", "not-a-key", "--cluster", redis_server.url],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "not an Ed25519 public key" in bad.stderr
    gone = subprocess.run(
        [JOBRUNNER, "cluster", "list", "--cluster", "redis://127.0.0.1:1/0"],
        capture_output=True,
        text=True,
    )
    assert gone.returncode == 1 and "does not answer" in gone.stderr
