"""The trusted pool coordinator in front of real workers on loopback."""

import asyncio
import base64
import http.server
import json
import os
import threading

import httpx
import websockets
from nacl.signing import SigningKey

from jobrunner.signing import challenge_message, verify_record, verify_signature
from support.jobclient import (
    GENEROUS,
    JOBRUNNER,
    log_of,
    submit,
    wait_finished,
)
from support.rewriting_proxy import RewritingProxy
from support.servers import wait_until

SLOW = {
    "main.py": "import time\nprint('start', flush=True)\ntime.sleep(1)\n"
    "open('r.txt','w').write('r')\n"
}


def test_routes_to_both_workers_and_proxies_every_endpoint(cluster, tmp_path):
    pool, workers = cluster(pool_args=["--rate-concurrent", "10"])
    keys = {httpx.get(f"{w.url}/health").json()["worker_id"] for w in workers}
    jobs = [submit(pool.url, SLOW, {"entrypoint": "main.py"}).json() for _ in range(4)]
    records = [wait_finished(pool.url, job["job_id"]) for job in jobs]
    assert all(r["status"] == "completed" for r in records)
    used = {r["worker_metadata"]["worker_id"] for r in records}
    assert used == keys  # least-loaded routing used both
    assert all(verify_record(r) for r in records)
    job = jobs[0]["job_id"]
    assert log_of(pool.url, job) == "start\n"
    assert httpx.get(f"{pool.url}/outputs/{job}").json()["outputs"] == [
        {"type": "file", "path": "r.txt", "size_bytes": 1}
    ]
    download = httpx.get(f"{pool.url}/download/{job}/r.txt")
    assert download.text == "r" and download.headers["content-disposition"].startswith("attach")
    assert httpx.get(f"{pool.url}/download/{job}/../x").status_code == 404

    async def follow(job_id):
        url = pool.url.replace("http", "ws", 1) + f"/logs/{job_id}/stream"
        async with websockets.connect(url) as socket:
            parts = []
            try:
                while True:
                    parts.append(await socket.recv())
            except websockets.ConnectionClosed:
                return "".join(parts), socket.close_code, socket.close_reason

    assert asyncio.run(follow(job)) == ("start\n", 1000, "completed")
    assert asyncio.run(follow("nope"))[1:] == (4404, "Job not found")
    assert httpx.get(f"{pool.url}/environments").json()["stats"]["total_templates"] == 6
    health = httpx.get(f"{pool.url}/health", params={"challenge": "n1"}).json()
    assert health["status"] == "healthy"
    assert verify_signature(
        health["worker_id"], challenge_message("n1"), health["challenge_signature"]
    )
    assert httpx.get(f"{pool.url}/").json()["service"] == "jobrunner-pool"
    stats = httpx.get(f"{pool.url}/stats").json()
    assert stats["your_quota"]["used"] > 0 and stats["system"]["active_jobs"] == 0
    for path in ("status", "logs", "outputs"):
        assert httpx.get(f"{pool.url}/{path}/nope").status_code == 404


def test_a_refused_dispatch_is_retried_on_another_worker(cluster):
    # The first worker (tried first: equal loads) refuses every submit; the pool moves on.
    pool, workers = cluster(
        worker_args=[["--rate-per-hour", "0"], []], pool_args=["--rate-concurrent", "10"]
    )
    second_key = httpx.get(f"{workers[1].url}/health").json()["worker_id"]
    jobs = [
        submit(pool.url, {"main.py": "print('ok')"}, {"entrypoint": "main.py"}) for _ in range(2)
    ]
    assert [job.status_code for job in jobs] == [200, 200]
    records = [wait_finished(pool.url, job.json()["job_id"]) for job in jobs]
    assert {record["worker_metadata"]["worker_id"] for record in records} == {second_key}
    assert all(record["status"] == "completed" for record in records)
    refused = httpx.get(f"{workers[0].url}/stats").json()["your_quota"]
    assert refused["can_submit"] is False and "Hourly limit" in refused["reason"]


def test_rate_limits_apply_at_the_pool_by_client(cluster):
    pool, _ = cluster(workers=1, pool_args=["--rate-concurrent", "1"])
    invalid = submit(pool.url, SLOW, {"entrypoint": "nope.py"})  # the worker's answer, as is
    assert invalid.status_code == 400 and invalid.json()["error"] == "Invalid manifest"
    assert submit(pool.url, SLOW, {"entrypoint": "main.py"}).status_code == 200
    refused = submit(pool.url, SLOW, {"entrypoint": "main.py"})
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert refused.json()["reason"] == "Concurrent job limit reached: 1/1 jobs"


def test_worker_with_a_key_not_on_the_allowlist_is_never_used(cluster, start_server):
    stranger = start_server(*GENEROUS, "--trusted-proxy", "127.0.0.1")
    wrong_key = base64.b64encode(bytes(SigningKey.generate().verify_key)).decode()
    pool, _ = cluster(workers=0, entries=[(stranger.url, wrong_key)])
    refused = submit(pool.url, SLOW, {"entrypoint": "main.py"})
    assert refused.status_code == 503 and refused.json()["error"] == "No worker available"
    assert httpx.get(f"{pool.url}/health").json()["status"] == "degraded"
    assert "not the allowlisted one" in pool.output


class Impostor(http.server.ThreadingHTTPServer):
    """Answers /health with a real worker's public key, but cannot sign the challenge."""

    def __init__(self, copied_key: str) -> None:
        self.submits = 0
        key = copied_key

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(handler):
                body = json.dumps(
                    {
                        "status": "healthy",
                        "worker_id": key,
                        "challenge_signature": base64.b64encode(bytes(64)).decode(),
                    }
                )
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.end_headers()
                handler.wfile.write(body.encode())

            def do_POST(handler):
                self.submits += 1
                handler.send_response(200)
                handler.end_headers()
                handler.wfile.write(b'{"job_id": "fake", "status": "queued", "position": 1}')

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def test_impostor_that_copies_a_public_key_fails_the_challenge(cluster, start_server):
    real = start_server(*GENEROUS)
    key = httpx.get(f"{real.url}/health").json()["worker_id"]
    impostor = Impostor(key)
    pool, _ = cluster(workers=0, entries=[(impostor.url, key)])
    assert wait_until(lambda: "failed the signed challenge" in pool.output)
    refused = submit(pool.url, SLOW, {"entrypoint": "main.py"})
    assert refused.status_code == 503
    assert impostor.submits == 0
    assert "failed the signed challenge" in pool.output
    impostor.shutdown()


def test_jobs_on_a_killed_worker_fail_with_worker_lost(cluster):
    pool, (worker,) = cluster(workers=1)
    job = submit(
        pool.url,
        {"main.py": "import time\ntime.sleep(30)\n"},
        {"entrypoint": "main.py", "timeout": 5},
    ).json()
    assert wait_until(
        lambda: httpx.get(f"{pool.url}/status/{job['job_id']}").json()["status"] == "running"
    )
    worker.proc.kill()
    worker.proc.wait()
    # Until the worker has failed enough health checks the pool says it cannot reach it (502).
    assert wait_until(
        lambda: httpx.get(f"{pool.url}/status/{job['job_id']}").json().get("status") == "failed",
        timeout=10,
    )
    record = httpx.get(f"{pool.url}/status/{job['job_id']}").json()
    assert record["failure"] == "worker_lost"
    assert httpx.get(f"{pool.url}/stats").json()["your_quota"]["active_jobs"] == 0
    assert submit(pool.url, SLOW, {"entrypoint": "main.py"}).status_code == 503


class Tamperer(RewritingProxy):
    """A worker's own proxy that forwards everything but rewrites finished status records."""

    def answer(self, path: str, body: bytes) -> bytes:
        if path.startswith("/status/") and b'"completed"' in body:
            record = json.loads(body)
            record["execution_metadata"]["exit_code"] = 0
            record["execution_metadata"]["cpu_seconds"] += 1  # the forgery
            body = json.dumps(record).encode()
        return body


def test_forged_result_signature_is_refused(cluster, start_server):
    real = start_server(*GENEROUS, "--trusted-proxy", "127.0.0.1")
    key = httpx.get(f"{real.url}/health").json()["worker_id"]
    tamperer = Tamperer(real.url)
    pool, _ = cluster(workers=0, entries=[(tamperer.url, key)])
    assert wait_until(lambda: httpx.get(f"{pool.url}/health").json()["status"] == "healthy")
    job = submit(pool.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"}).json()
    record = wait_finished(pool.url, job["job_id"])
    assert record["status"] == "failed" and record["failure"] == "bad_signature"
    assert wait_until(lambda: "does not verify" in pool.output)  # logged once, when recorded
    tamperer.shutdown()


def test_pool_needs_a_readable_workers_file(state_dir):
    import subprocess

    bad = state_dir / "bad.toml"
    bad.write_text('[[worker]]\nurl = "http://x"\n')
    result = subprocess.run(
        [JOBRUNNER, "pool", "--workers", str(bad), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ},
    )
    assert result.returncode == 1 and result.stderr.startswith("jobrunner: ")
    assert "key" in result.stderr
