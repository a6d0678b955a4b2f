"""What API clients expect (issue 23, item 7), against real servers running real jobs in nsjail:
`stdin` in the manifest, `DELETE /jobs/{id}`, `GET /status/{id}?wait=S`, through a pool too, and
the command line's `--stdin`, `cancel` and `status --wait`."""

import json
import secrets
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from jobrunner.signing import check_record
from support.jobclient import (
    GENEROUS,
    HELD,
    JOBRUNNER,
    log_of,
    release,
    submit,
    submit_in_background,
    wait_finished,
    worker_key,
)
from support.servers import wait_until

ECHO = (
    "import os, sys\n"
    "data = sys.stdin.buffer.read()\n"
    "print(len(data), os.readlink('/proc/self/fd/0'), flush=True)\n"
    "try:\n"
    "    os.write(0, b'x')\n"
    "    print('stdin writable')\n"
    "except OSError as error:\n"
    "    print('stdin read-only', error.errno)\n"
    "sys.stdout.buffer.write(b'<' + data + b'>')\n"
)
STDIN = "line one\nnul:\x00 tab:\t é ✓ 😀\n" * 3


def sleeper(token: str) -> str:
    """A job that says it runs, then sleeps with `token` in its command line (to find it)."""
    return (
        "import subprocess, sys\nprint('held', flush=True)\n"
        f"subprocess.run([sys.executable, '-c', 'import time; time.sleep(600)', '{token}'])\n"
    )


def processes_with(token: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def job_cgroups(state: Path, job_id: str) -> list[Path]:
    cgroups = Cgroups.detect(Layout.for_state(state).instance)
    assert cgroups is not None
    return [mount / cgroups.parent / job_id for mount in cgroups.mounts.values()]


def last_line(url: str, job_id: str) -> str:
    return log_of(url, job_id).rstrip("\n").rsplit("\n", 1)[-1]


# --- stdin ---------------------------------------------------------------------------------------


def test_the_manifests_stdin_reaches_the_entrypoint_read_only_and_nameless(server):
    job = submit(server.url, {"main.py": ECHO}, {"entrypoint": "main.py", "stdin": STDIN})
    assert job.status_code == 200, job.text
    record = wait_finished(server.url, job.json()["job_id"])
    assert record["status"] == "completed", record
    log = httpx.get(f"{server.url}/logs/{record['job_id']}").content.decode()
    size, link = log.split("\n", 1)[0].split(" ", 1)
    assert int(size) == len(STDIN.encode())
    # A sealed memfd: no host path of the server's for the job to learn, and nothing to write.
    assert link.startswith("/memfd:stdin") and "jobrunner" not in link
    assert "stdin read-only" in log
    assert f"<{STDIN}>" in log


def test_a_job_that_never_reads_a_full_stdin_finishes(server):
    code = "print('did not read it')\n"
    big = "y" * 2**20  # the cap exactly
    job = submit(server.url, {"main.py": code}, {"entrypoint": "main.py", "stdin": big})
    assert job.status_code == 200, job.text
    record = wait_finished(server.url, job.json()["job_id"])
    assert record["status"] == "completed"
    assert "did not read it" in log_of(server.url, record["job_id"])


def test_stdin_over_its_cap_is_refused_clearly(server):
    # 2**19 + 1 characters of 2 bytes each, sent as raw UTF-8 (as the client does).
    manifest = json.dumps({"entrypoint": "main.py", "stdin": "é" * (2**19 + 1)}, ensure_ascii=False)
    too_big = submit(server.url, {"main.py": "pass"}, manifest)
    assert too_big.status_code == 400
    assert too_big.json() == {
        "error": "Invalid manifest",
        "details": "stdin: 1048578 bytes as UTF-8, more than the 1048576 allowed",
    }
    escaped = json.dumps({"entrypoint": "main.py", "stdin": "\x01" * 2**19})  # 3 MiB of JSON
    refused = submit(server.url, {"main.py": "pass"}, escaped)
    assert refused.status_code == 400 and refused.json()["error"] == "Invalid manifest"
    assert "larger than 2097152 bytes" in refused.json()["details"]


def test_stdin_changes_the_job_hash_and_an_empty_one_does_not(server):
    files, manifest = {"main.py": "pass"}, {"entrypoint": "main.py"}
    plain = submit(server.url, files, manifest).json()["job_hash"]
    empty = submit(server.url, files, {**manifest, "stdin": ""}).json()["job_hash"]
    given = submit(server.url, files, {**manifest, "stdin": "x"}).json()["job_hash"]
    assert plain == empty != given


# --- DELETE /jobs/{id} ------------------------------------------------------------------------


def test_cancelling_a_queued_job_fails_it_at_once_and_frees_the_slot(start_server, state_dir):
    server = start_server("--concurrency", "1", "--rate-concurrent", "2", "--rate-streams", "100")
    running = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()
    queued = submit(server.url, {"main.py": "print('never')"}, {"entrypoint": "main.py"}).json()
    assert httpx.get(f"{server.url}/status/{queued['job_id']}").json()["status"] == "queued"
    third = submit(server.url, {"main.py": "pass"}, {"entrypoint": "main.py"})
    assert third.status_code == 429  # both of the client's slots are taken

    answer = httpx.delete(f"{server.url}/jobs/{queued['job_id']}")
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert record["status"] == "failed" and record["failure"] == "cancelled"
    assert record["started_at"] is None and record["output_files"] == {}
    check_record(
        record, worker_key(server.url), job_id=queued["job_id"], job_hash=queued["job_hash"]
    )
    assert httpx.get(f"{server.url}/status/{queued['job_id']}").json() == record
    assert last_line(server.url, queued["job_id"]) == (
        "[jobrunner] the job was cancelled (DELETE /jobs/{id})"
    )
    again = submit(server.url, {"main.py": "pass"}, {"entrypoint": "main.py"})
    assert again.status_code == 200, again.text  # the cancelled job's slot is free at once

    release(server.url, state_dir / "s0", running["job_id"])
    assert wait_finished(server.url, running["job_id"])["status"] == "completed"
    # The cancelled job never ran: the next one did.
    assert wait_finished(server.url, again.json()["job_id"])["status"] == "completed"
    assert "never" not in log_of(server.url, queued["job_id"])


def test_a_cancel_as_the_job_starts_is_a_cancel_not_a_sandbox_error(server):
    # A cancel that reaches the jail before nsjail has written its log: the job was cancelled
    # (it used to read `sandbox_error`, the log file missing; 1 to 6 times in 60 such races).
    seen = set()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for _ in range(40):
            job = submit(server.url, {"main.py": "print('hi')"}, {"entrypoint": "main.py"})
            answer = client.delete(f"/jobs/{job.json()['job_id']}")
            if answer.status_code == 409:  # it had finished already
                record = client.get(f"/status/{job.json()['job_id']}").json()
                assert record["status"] == "completed", record
            else:
                assert answer.status_code == 200, answer.text
                record = answer.json()
                assert (record["status"], record["failure"]) == ("failed", "cancelled"), record
            seen.add(record["status"])
    assert "failed" in seen  # some of the cancels did reach a job before its end


def test_cancelling_a_running_job_kills_its_jail_and_measures_it(start_server, state_dir):
    server = start_server("--rate-concurrent", "1", "--rate-streams", "100")
    token = f"cancel-me-{secrets.token_hex(8)}"
    job = submit(
        server.url, {"main.py": sleeper(token)}, {"entrypoint": "main.py", "timeout": 120}
    ).json()
    job_id = job["job_id"]
    assert wait_until(lambda: "held" in log_of(server.url, job_id), timeout=60)
    assert wait_until(lambda: processes_with(token), timeout=30)
    assert httpx.get(f"{server.url}/status/{job_id}").json()["status"] == "running"

    answer = httpx.delete(f"{server.url}/jobs/{job_id}", timeout=60)
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert record["status"] == "failed" and record["failure"] == "cancelled"
    assert record["started_at"] is not None and record["output_files"] == {}
    assert record["execution_metadata"]["memory_peak_bytes"] > 0
    assert record["execution_metadata"]["cpu_seconds"] > 0  # the interpreters' start, at least
    check_record(record, worker_key(server.url), job_id=job_id, job_hash=job["job_hash"])
    # When the answer comes, the jail is gone: its processes, its cgroups, its work dir.
    assert processes_with(token) == []
    assert not any(path.exists() for path in job_cgroups(state_dir / "s0", job_id))
    assert not (Layout.for_state(state_dir / "s0").work / job_id).exists()
    assert last_line(server.url, job_id) == "[jobrunner] the job was cancelled (DELETE /jobs/{id})"
    # The client's one slot is free again at once, and so is the job slot with its uid.
    follow_up = submit(server.url, {"main.py": "print('next')"}, {"entrypoint": "main.py"})
    assert follow_up.status_code == 200, follow_up.text
    assert wait_finished(server.url, follow_up.json()["job_id"])["status"] == "completed"


def test_cancelling_a_finished_or_unknown_job(server):
    job = submit(server.url, {"main.py": "print('done')"}, {"entrypoint": "main.py"}).json()
    record = wait_finished(server.url, job["job_id"])
    late = httpx.delete(f"{server.url}/jobs/{job['job_id']}")
    assert late.status_code == 409
    assert late.json() == {
        "error": "Job already finished",
        "details": f"job {job['job_id']} has already finished: completed",
    }
    assert httpx.get(f"{server.url}/status/{job['job_id']}").json() == record  # unchanged
    unknown = httpx.delete(f"{server.url}/jobs/nosuchjob")
    assert unknown.status_code == 404 and unknown.json()["error"] == "Job not found"


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("environment", "other_ends"), [("nlp", None), ("scientific", "failed")])
def test_a_job_cancelled_while_its_environment_builds_stays_cancelled(
    start_server, templates, environment, other_ends
):
    """Once built (or failed), the environment neither runs the cancelled job nor finishes it
    a second time; the job waiting beside it goes on as usual."""
    server = start_server(*GENEROUS, "--templates-dir", str(templates))
    code = "import six\nprint('six', six.__version__)\n"
    manifest = {"entrypoint": "main.py", "environment": environment}
    cancelled, other = (submit(server.url, {"main.py": code}, manifest).json() for _ in range(2))
    assert wait_until(lambda: "is being built" in log_of(server.url, cancelled["job_id"]))
    answer = httpx.delete(f"{server.url}/jobs/{cancelled['job_id']}")
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert record["failure"] == "cancelled"
    ended = wait_finished(server.url, other["job_id"], 200)
    assert ended["status"] == (other_ends or "completed"), log_of(server.url, other["job_id"])
    assert httpx.get(f"{server.url}/status/{cancelled['job_id']}").json() == record
    log = log_of(server.url, cancelled["job_id"])
    assert "six 1.16.0" not in log and log.endswith("cancelled (DELETE /jobs/{id})\n")


# --- GET /status/{id}?wait=S ---------------------------------------------------------------------


def test_a_long_poll_answers_when_the_job_finishes(server):
    job = submit(server.url, {"main.py": "print('quick')"}, {"entrypoint": "main.py"}).json()
    answer = httpx.get(f"{server.url}/status/{job['job_id']}", params={"wait": "60"}, timeout=90)
    assert answer.status_code == 200
    assert answer.json()["status"] == "completed"
    check_record(answer.json(), job_id=job["job_id"], job_hash=job["job_hash"])


def test_a_long_poll_answers_with_the_current_record_after_its_time(server, state_dir):
    job = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()
    assert wait_until(lambda: "held" in log_of(server.url, job["job_id"]), timeout=60)
    answer = httpx.get(f"{server.url}/status/{job['job_id']}", params={"wait": "0.2"}, timeout=60)
    assert answer.status_code == 200 and answer.json()["status"] == "running"
    release(server.url, state_dir / "s0", job["job_id"])
    wait_finished(server.url, job["job_id"])


def test_wait_out_of_range_is_a_clear_400(server):
    job = submit(server.url, {"main.py": "pass"}, {"entrypoint": "main.py"}).json()
    for bad in ("0", "61", "60.001", "-1", "abc", "1e3", "nan", "", " 5"):
        answer = httpx.get(f"{server.url}/status/{job['job_id']}", params={"wait": bad})
        assert answer.status_code == 400, bad
        assert answer.json()["error"] == "Invalid parameter", bad
    missing = httpx.get(f"{server.url}/status/nosuchjob", params={"wait": "5"})
    assert missing.status_code == 404


def test_long_polls_count_as_streams(start_server, state_dir):
    server = start_server("--rate-streams", "1", "--rate-concurrent", "10")
    job = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py"}).json()
    assert wait_until(lambda: "held" in log_of(server.url, job["job_id"]), timeout=60)
    status_url = f"{server.url}/status/{job['job_id']}"
    first: list[httpx.Response] = []

    def long_poll() -> None:
        # Asked again if a probe below held the one stream at that moment.
        while (
            answer := httpx.get(status_url, params={"wait": "60"}, timeout=90)
        ).status_code == 429:
            pass
        first.append(answer)

    waiter = threading.Thread(target=long_poll)
    waiter.start()
    try:
        # The waiter holds the client's one stream: a log (a stream too) is refused.
        def refused() -> bool:
            return httpx.get(f"{server.url}/logs/{job['job_id']}").status_code == 429

        assert wait_until(refused, timeout=30)
        assert httpx.get(status_url).status_code == 200  # a plain status is no stream
        again = httpx.get(status_url, params={"wait": "1"})
        assert again.status_code == 429 and "streams" in again.json()["reason"]
    finally:
        (Layout.for_state(state_dir / "s0").work / job["job_id"] / "go").write_text("")
        waiter.join(90)
    assert first[0].status_code == 200 and first[0].json()["status"] == "completed"


def test_submit_with_wait_answers_with_the_signed_final_record(server):
    """`POST /submit?wait=S`: submit and wait in one request (Judge0's `wait=true`)."""
    answer = submit(
        server.url, {"main.py": "print('quick')"}, {"entrypoint": "main.py"}, params={"wait": "60"}
    )
    assert answer.status_code == 200, answer.text
    record = answer.json()
    assert record["status"] == "completed"
    check_record(record, worker_key(server.url), job_id=record["job_id"])
    assert httpx.get(f"{server.url}/status/{record['job_id']}").json() == record
    assert log_of(server.url, record["job_id"]) == "quick\n"


# --- through a pool ------------------------------------------------------------------------------


def test_a_pool_proxies_stdin_cancel_and_long_polls(cluster):
    pool, workers = cluster(workers=1, pool_args=["--rate-concurrent", "1"])
    keys = {worker_key(w.url) for w in workers}
    echoed = submit(pool.url, {"main.py": ECHO}, {"entrypoint": "main.py", "stdin": STDIN}).json()
    answer = httpx.get(f"{pool.url}/status/{echoed['job_id']}", params={"wait": "60"}, timeout=90)
    assert answer.status_code == 200 and answer.json()["status"] == "completed"
    assert f"<{STDIN}>" in httpx.get(f"{pool.url}/logs/{echoed['job_id']}").content.decode()

    token = f"pool-cancel-{secrets.token_hex(8)}"
    job = submit(pool.url, {"main.py": sleeper(token)}, {"entrypoint": "main.py"}).json()
    assert wait_until(lambda: processes_with(token), timeout=60)
    assert httpx.post(f"{pool.url}/submit").status_code == 429  # the client's one slot is taken
    cancelled = httpx.delete(f"{pool.url}/jobs/{job['job_id']}", timeout=60)
    assert cancelled.status_code == 200, cancelled.text
    record = cancelled.json()
    assert record["status"] == "failed" and record["failure"] == "cancelled"
    assert record["worker_metadata"]["worker_id"] in keys  # the worker's own signed record
    check_record(record, job_id=job["job_id"], job_hash=job["job_hash"])
    assert processes_with(token) == []
    assert httpx.get(f"{pool.url}/status/{job['job_id']}").json() == record
    again = submit(pool.url, {"main.py": "pass"}, {"entrypoint": "main.py"})
    assert again.status_code == 200, again.text  # the pool recorded it finished: slot free
    assert httpx.delete(f"{pool.url}/jobs/{job['job_id']}").status_code == 409
    assert httpx.delete(f"{pool.url}/jobs/nosuchjobnosuchjob").status_code == 404
    bad = httpx.get(f"{pool.url}/status/{job['job_id']}", params={"wait": "0"})
    assert bad.status_code == 400 and bad.json()["error"] == "Invalid parameter"
    wait_finished(pool.url, again.json()["job_id"])
    # Submit and wait in one request, through the pool: the worker's own signed record.
    one = submit(
        pool.url, {"main.py": "print(2)"}, {"entrypoint": "main.py"}, params={"wait": "60"}
    )
    assert one.status_code == 200, one.text
    assert one.json()["status"] == "completed"
    assert one.json()["worker_metadata"]["worker_id"] in keys
    check_record(one.json(), job_id=one.json()["job_id"])
    refused = submit(
        pool.url, {"main.py": "pass"}, {"entrypoint": "main.py"}, params={"wait": "61"}
    )
    assert refused.status_code == 400 and refused.json()["error"] == "Invalid parameter"


def test_a_pool_whose_worker_dies_during_submit_and_wait_still_names_the_job(cluster):
    """`POST /submit?wait=S` through a pool: the worker took the job, then died while the
    request waited. The answer is the worker's acceptance (its `job_id`), not a 502 without it,
    and the pool reports the job lost."""
    pool, (worker,) = cluster(workers=1)
    waiter, answers = submit_in_background(
        pool.url, {"main.py": HELD}, {"entrypoint": "main.py"}, params={"wait": "60"}
    )
    try:
        assert wait_until(
            lambda: httpx.get(f"{worker.url}/stats").json()["system"]["active_jobs"] == 1,
            timeout=60,
        )
        assert not answers
        worker.proc.kill()
        waiter.join(60)
    finally:
        worker.stop()
        waiter.join(60)
    assert answers and answers[0].status_code == 200, answers and answers[0].text
    accepted = answers[0].json()
    assert accepted["status"] == "queued" and accepted["job_hash"]
    status_url = f"{pool.url}/status/{accepted['job_id']}"

    def lost() -> bool:  # 502 while the pool still counts the worker as only unreachable
        answer = httpx.get(status_url, timeout=10)
        return answer.status_code == 200 and answer.json()["failure"] == "worker_lost"

    assert wait_until(lost, timeout=60)


# --- the command line ----------------------------------------------------------------------------


def test_the_cli_sends_stdin_cancels_and_waits(server, tmp_path):
    env = {"JOBRUNNER_SERVER": server.url}
    project = tmp_path / "echo.py"
    project.write_text("import sys\nprint('got', sys.stdin.read().upper())\n")
    given = subprocess.run(
        [JOBRUNNER, "submit", str(project), "--stdin", "-", "--download", str(tmp_path / "out")],
        input=b"hello from stdin",
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert given.returncode == 0, given.stderr
    job_id = given.stderr.decode().split()[1]
    assert "got HELLO FROM STDIN" in log_of(server.url, job_id)
    not_text = tmp_path / "binary"
    not_text.write_bytes(b"\xff\xfe")
    refused = subprocess.run(
        [JOBRUNNER, "submit", str(project), "--stdin", str(not_text)],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode == 2 and b"--stdin takes UTF-8 text" in refused.stderr

    held = tmp_path / "held.py"
    held.write_text(HELD)
    queued = subprocess.run(
        [JOBRUNNER, "submit", str(held)], capture_output=True, env=env, timeout=60, check=True
    )
    held_id = queued.stdout.decode().strip()
    assert wait_until(lambda: "held" in log_of(server.url, held_id), timeout=60)
    waited = subprocess.run(
        [JOBRUNNER, "status", held_id, "--wait", "0.1"], capture_output=True, env=env, timeout=60
    )
    assert waited.returncode == 0 and json.loads(waited.stdout)["status"] == "running"
    cancel = subprocess.run(
        [JOBRUNNER, "cancel", held_id], capture_output=True, env=env, timeout=60
    )
    assert cancel.returncode == 0, cancel.stderr
    assert json.loads(cancel.stdout)["failure"] == "cancelled"
    twice = subprocess.run([JOBRUNNER, "cancel", held_id], capture_output=True, env=env, timeout=60)
    assert twice.returncode == 1
    assert b"409 Job already finished" in twice.stderr and b"failed (cancelled)" in twice.stderr
    final = subprocess.run(
        [JOBRUNNER, "status", held_id, "--wait", "60"], capture_output=True, env=env, timeout=90
    )
    assert json.loads(final.stdout)["failure"] == "cancelled"
