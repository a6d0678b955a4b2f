"""What an operator sees of a cluster (real nodes, real nsjail, real redis-server): `/metrics` and
`GET /` describe the cluster, not the node's empty in-memory queue; a lost node is listed as
lost, then forgotten; a store behind an ACL user and TLS (`rediss://user:password@`) works."""

import signal
import subprocess

import httpx
import pytest

from support.clusternodes import cluster_says, let_go, status, submit_held
from support.jobclient import GENEROUS, JOBRUNNER, run_job, submit, worker_key
from support.redisserver import RedisServer, free_port
from support.servers import wait_until

pytestmark = pytest.mark.timeout(300)
QUICK = {"main.py": "print('quick')"}


def gauge(metrics_url: str, name: str) -> float | None:
    for line in httpx.get(f"{metrics_url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_metrics_and_the_info_text_are_the_clusters(start_node, state_dir):
    worker = start_node(concurrency=1)
    front = start_node("--metrics", "127.0.0.1:0", concurrency=0)
    states = [state_dir / "s0", state_dir / "s1"]
    held = submit_held(front.url)
    assert wait_until(lambda: status(front.url, held)["status"] == "running", timeout=60)
    queued = [submit(front.url, QUICK, {"entrypoint": "main.py"}) for _ in range(2)]
    assert all(answer.status_code == 200 for answer in queued)
    # The front end runs nothing: its gauges say the cluster's queue and running jobs (read
    # from the store at most once a second), its own running jobs stay its own.
    assert wait_until(lambda: bool(front.metrics_url))
    url = front.metrics_url
    assert wait_until(lambda: gauge(url, "jobrunner_queue_length") == 2, timeout=30)
    assert wait_until(lambda: gauge(url, "jobrunner_cluster_running_jobs") == 1, timeout=30)
    assert gauge(url, "jobrunner_running_jobs") == 0
    info = httpx.get(f"{front.url}/").json()
    assert "cluster" in info["description"] and "runs no job" in info["description"]
    assert "2 job(s) queued and 1 claimed or running" in info["description"]
    assert "The queue lives in memory" not in info["privacy"]
    assert "cluster's store" in info["privacy"]
    assert "runs up to 1 job(s) at once" in httpx.get(f"{worker.url}/").json()["description"]
    let_go(front.url, states, held)
    assert wait_until(lambda: gauge(url, "jobrunner_queue_length") == 0, timeout=60)


def test_a_lost_node_is_listed_lost_then_forgotten(start_node, redis_server):
    doomed = start_node(concurrency=1)
    # The survivor forgets a lost node once it has been silent for its --retention (20 s here;
    # it is seen lost after --lost-after, 3 s).
    start_node("--retention", "20", concurrency=1)

    def shown() -> str:
        return cluster_says(redis_server.url, "status")

    assert "2 up, 0 lost" in shown()
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.wait()
    assert wait_until(lambda: "lost (last seen" in (now := shown()) and "1 lost" in now, timeout=60)
    assert wait_until(lambda: doomed.url not in shown(), timeout=60)
    assert "1 up, 0 lost" in shown()


def _certificates(folder) -> None:
    """A CA of the test's own and a certificate for 127.0.0.1 signed by it."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj",
            "/CN=jobrunner test CA")  # fmt: skip
    openssl("req", *ec, "-keyout", "redis.key", "-out", "redis.csr", "-subj", "/CN=127.0.0.1")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    sign = ("-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1")
    openssl("x509", "-req", "-in", "redis.csr", *sign, "-out", "redis.pem", "-extfile", "san.ext")


# The README's ACL line for the nodes' user.
ACL = (
    "jobrunner on >s3cret ~jr:* &jr:* +@read +@write +@stream +@scripting +@pubsub +@blocking "
    "+ping +time -@dangerous"
)


def test_an_acl_user_over_tls(start_server, tmp_path):
    tls = tmp_path / "tls"
    tls.mkdir()
    _certificates(tls)
    tls_port = str(free_port())
    redis = RedisServer(
        tmp_path,
        "--user", "default", "off",
        "--user", *ACL.split(),
        "--tls-port", tls_port,
        "--tls-cert-file", str(tls / "redis.pem"),
        "--tls-key-file", str(tls / "redis.key"),
        "--tls-ca-cert-file", str(tls / "ca.pem"),
        "--tls-auth-clients", "no",
        login=("jobrunner", "s3cret"),
    )  # fmt: skip
    try:
        url = f"rediss://jobrunner:s3cret@127.0.0.1:{tls_port}/0?ssl_ca_certs={tls / 'ca.pem'}"
        nodes = [
            start_server(*GENEROUS, "--cluster", url, "--concurrency", str(n), "--lost-after", "3")
            for n in (0, 1)
        ]
        for node in nodes:
            subprocess.run(
                [JOBRUNNER, "cluster", "allow", worker_key(node.url), "--cluster", url],
                check=True,
                capture_output=True,
            )
        record = run_job(nodes[0].url, "print('over tls')")
        assert record["status"] == "completed", record
        assert record["worker_metadata"]["worker_id"] == worker_key(nodes[1].url)
        assert httpx.get(f"{nodes[0].url}/logs/{record['job_id']}").text == "over tls\n"
        # A wrong password is refused, and said so.
        wrong = url.replace("s3cret", "wrong")
        refused = subprocess.run(
            [JOBRUNNER, "cluster", "list", "--cluster", wrong], capture_output=True, text=True
        )
        assert refused.returncode == 1 and "does not answer" in refused.stderr
        # A node drained (SIGTERM) leaves the registry under that ACL too.
        nodes[1].terminate()
        nodes[1].wait(120)
        shown = cluster_says(url, "status")
        assert nodes[1].url not in shown and "1 up, 0 lost" in shown, shown
    finally:
        redis.kill()


def test_a_second_sigterm_stops_a_node_that_waits_for_unread_outputs(start_node, redis_server):
    """The first SIGTERM drains: the node stays while its finished jobs' outputs are unread. The
    second means at once: it used to wait for that drain again at shutdown, and ignored every
    further signal until it was killed."""
    node = start_node()
    key = worker_key(node.url)
    record = run_job(node.url, "open('out.txt', 'w').write('x')\n", outputs=["out.txt"])
    assert record["status"] == "completed", record
    node.terminate()
    assert wait_until(lambda: "draining" in node.output, timeout=30)
    assert node.proc.poll() is None  # it waits for the output to be downloaded
    node.proc.send_signal(signal.SIGTERM)
    assert node.wait(60) == 0, node.output[-2000:]
    assert "stopped at once" in node.output
    listed = cluster_says(redis_server.url, "status")
    assert key not in listed  # it left the registry: nothing of it ran
