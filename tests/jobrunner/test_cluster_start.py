"""When a cluster node writes a job's start (`jobrunner.cluster.claiming`, `--start-after`): a job
that ends sooner writes only its end, its log with its record in one script; a longer one is read
`running` from any node, its live log copied as it grows. Real nodes with the real nsjail, a real
redis-server, counted with the store's own MONITOR (no timing)."""

import hashlib

import pytest

from jobrunner.cluster import queue
from support.clusternodes import let_go, status, submit_held
from support.jobclient import log_of, submit, wait_finished
from support.servers import wait_until

pytestmark = pytest.mark.timeout(300)


def digest(source: str) -> str:
    return hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()


def test_a_job_that_ends_before_its_start_is_due_writes_only_its_end(
    start_node, redis_server, monitor
):
    """With the start due after a minute, a short job's node sends no start and no log entry of
    its own: its whole log comes with its final record (one script), and any node reads both."""
    node = start_node("--start-after", "60", concurrency=1)
    front = start_node(concurrency=0)
    hello = ({"main.py": "print('hello from the jail')"}, {"entrypoint": "main.py"})
    warm = submit(node.url, *hello)  # loads the scripts into the store (NOSCRIPT, then again)
    assert wait_finished(front.url, warm.json()["job_id"])["status"] == "completed"
    answer = submit(node.url, *hello)
    assert answer.status_code == 200, answer.text
    job_id = answer.json()["job_id"]
    assert wait_finished(front.url, job_id)["status"] == "completed"
    assert "hello from the jail" in log_of(front.url, job_id)
    entries = redis_server.cli("LRANGE", f"jr:log:{job_id}", "0", "-1").split("\n")
    assert entries[0].startswith("d") and entries[-1] == "ecompleted", entries
    redis_server.cli("ECHO", "finished")  # every command before it is in the monitor's file
    assert wait_until(lambda: monitor.count("ECHO", "finished") == 1, timeout=30)
    start = digest(queue._PRELUDE + queue._START)
    finish = digest(queue._PRELUDE + queue.CPU_LEDGER + queue._FINISH)
    sent = monitor.path.read_text(errors="replace").splitlines()
    by_nodes = [line for line in sent if "lua]" not in line and job_id in line]
    assert not [line for line in by_nodes if start in line], "\n".join(by_nodes)
    assert not [line for line in by_nodes if '"RPUSH"' in line], "\n".join(by_nodes)
    assert len([line for line in by_nodes if finish in line]) == 1, "\n".join(by_nodes)


def test_a_longer_job_is_read_running_with_its_live_log_from_another_node(start_node, state_dir):
    """Past `--start-after` the start is in the store: a front end that never ran the job reads
    it `running`, with what it printed so far, while it still runs (held until the test lets
    it go)."""
    node = start_node("--start-after", "0.2", concurrency=1)
    front = start_node(concurrency=0)
    job_id = submit_held(node.url)
    assert wait_until(lambda: status(front.url, job_id)["status"] == "running", timeout=60)
    assert wait_until(lambda: "held" in log_of(front.url, job_id), timeout=60)
    assert status(front.url, job_id)["status"] == "running"  # held: it cannot have ended
    let_go(front.url, [state_dir / "s0", state_dir / "s1"], job_id)
    assert wait_finished(front.url, job_id, timeout=120)["status"] == "completed"
    assert log_of(front.url, job_id).count("released") == 1


def test_a_job_reads_running_on_its_own_node_only_once_its_start_is_in_the_store(
    start_node, state_dir
):
    """Every node, the one that runs it too, reads a job whose start is not written as about to
    start: `running` anywhere means the cluster holds its start (a node lost after that loses the
    job, `worker_lost`; before, the job is queued again)."""
    node = start_node("--start-after", "60", concurrency=1)
    job_id = submit_held(node.url)
    assert wait_until(lambda: "held" in log_of(node.url, job_id), timeout=60)  # it runs
    record = status(node.url, job_id)
    assert (record["status"], record["position"]) == ("queued", 0), record
    let_go(node.url, [state_dir / "s0"], job_id)
    assert wait_finished(node.url, job_id)["status"] == "completed"
