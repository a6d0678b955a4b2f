"""Deletion after download and after retention, graceful shutdown, and starting up."""

import datetime as dt
import ssl
import subprocess
import time

import httpx
import trustme

from support.jobclient import (
    HELD,
    JOBRUNNER,
    log_of,
    release,
    run_job,
    submit,
    tarball,
    wait_finished,
)
from support.servers import ServerProcess, wait_until


def gone(url: str, job_id: str) -> bool:
    return httpx.get(f"{url}/status/{job_id}").status_code == 404


def test_deleted_shortly_after_every_output_was_downloaded(start_server, state_dir):
    server = start_server("--delete-after-download", "1", "--retention", "60")
    record = run_job(server.url, "open('a.txt','w').write('a')\nopen('b.txt','w').write('b')\n")
    job = record["job_id"]
    witness = run_job(server.url, "open('w.txt','w').write('w')\n")["job_id"]
    httpx.get(f"{server.url}/download/{job}/a.txt")
    httpx.get(f"{server.url}/download/{witness}/w.txt")
    # The witness, every output downloaded after `job`'s first one, is deleted: the delay has
    # passed for `job` too, and the deletion sweep has looked at it.
    assert wait_until(lambda: gone(server.url, witness), timeout=10)
    assert not gone(server.url, job)  # b.txt was not downloaded yet
    # Deleted once its last output was downloaded: not before the delay of 1 s has passed since
    # (a lower bound that holds on a busy machine too), and soon after.
    asked = time.time()
    httpx.get(f"{server.url}/download/{job}/b.txt")
    assert wait_until(lambda: gone(server.url, job), timeout=60)
    assert time.time() >= asked + 1
    for path in (f"outputs/{job}", f"logs/{job}", f"download/{job}/a.txt"):
        assert httpx.get(f"{server.url}/{path}").status_code == 404
    assert wait_until(lambda: not (state_dir / "s0" / "jobs" / job).exists(), timeout=60)


def test_deleted_after_retention_even_without_downloads(start_server, state_dir):
    server = start_server("--retention", "1.5")
    record = run_job(server.url, "print('hi')")
    # Deleted, and not before the retention has passed since the job finished (the record's time
    # and this clock are the same machine's): a lower bound that a busy machine cannot break.
    assert wait_until(lambda: gone(server.url, record["job_id"]), timeout=60)
    finished = dt.datetime.fromisoformat(record["finished_at"]).timestamp()
    assert time.time() >= finished + 1.5
    # Its files go right after it (the reaper forgets the job, then removes them in a thread).
    jobs = state_dir / "s0" / "jobs"
    assert wait_until(lambda: list(jobs.iterdir()) == [], timeout=60), list(jobs.iterdir())


def test_sigterm_lets_the_running_job_finish(start_server):
    server = start_server()
    job = submit(
        server.url,
        {"main.py": "import time\ntime.sleep(1.5)\nprint('finished')\n"},
        {"entrypoint": "main.py"},
    ).json()
    assert wait_until(
        lambda: httpx.get(f"{server.url}/status/{job['job_id']}").json()["status"] == "running"
    )
    started = time.monotonic()
    server.terminate()
    # Submits are refused meanwhile (test_hostile.py checks the 503); the job is waited for,
    # then served until its record is read (it has no outputs to download).
    assert wait_finished(server.url, job["job_id"])["status"] == "completed"
    assert server.wait(30) == 0
    assert time.monotonic() - started >= 1.0  # it waited for the job
    assert f"job {job['job_id']} completed" in server.output


def test_a_stopping_server_serves_finished_results_until_they_are_collected(
    start_server, state_dir
):
    # It used to exit as soon as its last job ended: a client (or a pool) that had not yet read
    # the result found nothing. Now it stays until the record was read and the outputs
    # downloaded (or deleted at `retention`), then exits by itself.
    server = start_server()
    code = HELD + "open('out.txt', 'w').write('kept')\n"
    manifest = {"entrypoint": "main.py", "timeout": 120, "outputs": ["out.txt"]}  # not `go`
    job = submit(server.url, {"main.py": code}, manifest).json()
    assert wait_until(lambda: "held" in log_of(server.url, job["job_id"]), timeout=60)
    server.terminate()
    assert wait_until(lambda: httpx.get(f"{server.url}/health").status_code == 503, timeout=30)
    assert httpx.get(f"{server.url}/health").json()["status"] == "draining"
    release(server.url, state_dir / "s0", job["job_id"])
    record = wait_finished(server.url, job["job_id"])
    assert record["status"] == "completed"
    # The record was read, the output not yet downloaded: everything is still served.
    assert wait_until(lambda: "handing over: 1 finished job(s)" in server.output, timeout=30)
    assert httpx.get(f"{server.url}/outputs/{job['job_id']}").status_code == 200
    assert "released" in log_of(server.url, job["job_id"])
    assert httpx.get(f"{server.url}/download/{job['job_id']}/out.txt").text == "kept"
    assert server.wait(30) == 0
    assert "handed over: 0 finished job(s) left uncollected" in server.output


def test_a_second_sigterm_stops_a_stopping_server_at_once(start_server):
    server = start_server("--retention", "600")
    run_job(server.url, "open('out.txt', 'w').write('never downloaded')")
    server.terminate()
    # It waits for the download (up to the retention, 10 minutes)...
    assert wait_until(lambda: "handing over: 1 finished job(s)" in server.output, timeout=30)
    assert httpx.get(f"{server.url}/health").status_code == 503
    server.terminate()  # ...unless told again
    assert server.wait(30) == 0
    assert "SIGTERM received again: stopping at once" in server.output


def test_refuses_to_start_without_a_sandbox(state_dir):
    result = subprocess.run(
        [JOBRUNNER, "serve", "--port", "0", "--state-dir", str(state_dir)],
        env={"NSJAIL": "/nonexistent/nsjail", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "no working sandbox" in result.stderr and "--unsafe-no-sandbox" in result.stderr
    assert "Traceback" not in result.stderr


def test_unsafe_mode_warns_on_start_and_in_server_information(state_dir):
    with ServerProcess(
        [
            JOBRUNNER,
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(state_dir / "u"),
            "--unsafe-no-sandbox",
        ]
    ) as server:
        assert "WARNING: UNSAFE" in server.output
        info = httpx.get(f"{server.url}/").json()
        assert info["warning"].startswith("UNSAFE")
        record = run_job(server.url, "print('unsandboxed')")
        assert record["status"] == "completed"
        assert log_of(server.url, record["job_id"]) == "unsandboxed\n"
        many = run_job(server.url, "for i in range(1200):\n    open(f'f{i:04d}', 'w').close()\n")
        assert many["failure"] == "output_limit" and len(many["output_files"]) == 1000


def test_serves_https_with_certificate_and_key(start_server, state_dir):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile = state_dir / "cert.pem", state_dir / "key.pem"
    cert.cert_chain_pems[0].write_to_path(certfile)
    cert.private_key_pem.write_to_path(keyfile)
    server = start_server("--certfile", str(certfile), "--keyfile", str(keyfile))
    assert server.url.startswith("https://")
    context = ssl.create_default_context()
    ca.configure_trust(context)
    assert httpx.get(f"{server.url}/health", verify=context).json()["status"] == "healthy"


def test_a_job_reported_finished_is_never_counted_active(start_server):
    """`/stats` never contradicts `/status`: a job's teardown follows its final record (and
    waits while nothing needs its slot), but once the record says finished, `active_jobs` does
    not count the job. Asked at once, on one connection, twenty times."""
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for _ in range(20):
            answer = client.post(
                "/submit",
                params={"wait": "60"},
                data={"manifest": '{"entrypoint": "main.py"}'},
                files={"files": ("job.tar.gz", tarball({"main.py": "print(1)"}))},
            )
            assert answer.json()["status"] == "completed", answer.text
            assert client.get("/stats").json()["system"] == {"queue_length": 0, "active_jobs": 0}


def test_queued_jobs_positions_and_concurrency(start_server, state_dir):
    server = start_server("--concurrency", "2", "--rate-concurrent", "10")
    # Held jobs: the first two run until released, however slowly the four submits go.
    jobs = [
        submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py", "timeout": 120}).json()
        for _ in range(4)
    ]

    def two_running() -> bool:
        first = [httpx.get(f"{server.url}/status/{j['job_id']}").json() for j in jobs[:2]]
        return all(record["status"] == "running" for record in first)

    assert wait_until(two_running)
    states = [httpx.get(f"{server.url}/status/{j['job_id']}").json() for j in jobs]
    assert [s["status"] for s in states] == ["running", "running", "queued", "queued"]
    assert [s["position"] for s in states[2:]] == [1, 2]
    system = httpx.get(f"{server.url}/stats").json()["system"]
    assert system == {"queue_length": 2, "active_jobs": 2}
    for job in jobs:
        release(server.url, state_dir / "s0", job["job_id"])
        assert wait_finished(server.url, job["job_id"])["status"] == "completed"
