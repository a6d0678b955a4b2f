"""`--log-format json`: every line a server writes on stderr is one JSON object with the same
documented fields; jobs, refusals and the drain are events a log pipeline can select."""

import datetime as dt
import json
import logging
import sys

import pytest

from jobrunner.config import load
from jobrunner.logformat import FIELDS, JsonFormatter, client_key
from support.jobclient import GENEROUS, run_job, submit


def parsed_lines(output: str) -> list[dict]:
    lines = [json.loads(line) for line in output.splitlines()]  # each line is one JSON object
    for line in lines:
        assert list(line)[: len(FIELDS)] == list(FIELDS), line
        assert set(line) <= {*FIELDS, "exception"}, line
        assert line["time"].endswith("Z")
        dt.datetime.fromisoformat(line["time"])  # RFC 3339, UTC
        assert line["level"] in ("debug", "info", "warning", "error", "critical")
    return lines


def events(lines: list[dict], job_id: str | None = None) -> dict[str, dict]:
    return {line["event"]: line for line in lines if job_id is None or line["job_id"] == job_id}


def test_a_real_server_logs_jobs_refusals_and_its_drain_as_json(start_server):
    server = start_server(*GENEROUS, "--rate-per-hour", "1", "--log-format", "json")
    record = run_job(server.url, "print('hi')")
    for _ in range(5):  # a client refused in a loop: one line, not one per request
        refused = submit(server.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"})
        assert refused.status_code == 429
    server.terminate()
    assert server.wait(30) == 0
    lines = parsed_lines(server.output)
    job = events(lines, record["job_id"])
    assert job["job.accepted"]["status"] == "queued"
    assert job["job.started"]["status"] == "running"
    assert job["job.finished"]["status"] == "completed"
    assert job["job.finished"]["failure"] is None
    client = job["job.accepted"]["client"]
    assert client.startswith("c-")  # a pseudonym: no line about a client names its address
    assert not [line for line in lines if line["client"] and "127.0.0.1" in json.dumps(line)]
    assert {job[name]["client"] for name in job} == {client}
    every = events(lines)
    assert [line["repeated"] for line in lines if line["event"] == "request.refused"] == [None]
    assert every["request.refused"]["reason"] == "rate_hourly"
    assert every["request.refused"]["http_status"] == 429
    assert every["request.refused"]["client"] == client
    assert every["request.refused"]["level"] == "info"
    assert "listening on http://127.0.0.1:" in every["server.listening"]["message"]
    assert {"server.draining", "server.stopped"} <= set(every)


def test_the_pool_logs_as_json_too(cluster):
    pool, _ = cluster(workers=1, pool_args=("--log-format", "json", "--metrics", "127.0.0.1:0"))
    assert pool.metrics_url  # announced as a JSON line, still found
    record = run_job(pool.url, "print('via the pool')")
    pool.terminate()
    assert pool.wait(30) == 0
    lines = parsed_lines(pool.output)
    assert {"server.metrics", "server.listening", "server.stopped"} <= set(events(lines))
    job = events(lines, record["job_id"])
    assert job["job.accepted"]["status"] == "queued"
    assert job["job.finished"]["status"] == "completed"
    assert job["job.accepted"]["client"] == job["job.finished"]["client"]


def test_a_traceback_stays_on_its_line():
    try:
        raise RuntimeError("first\nsecond")
    except RuntimeError:
        record = logging.LogRecord(
            "jobrunner", logging.ERROR, __file__, 1, "job %s: failed", ("abc",), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    fields = json.loads(line)
    assert fields["message"] == "job abc: failed" and fields["event"] == "log"
    assert "RuntimeError: first\nsecond" in fields["exception"]


def test_client_key_is_a_stable_pseudonym():
    assert client_key("192.0.2.1") == client_key("192.0.2.1") != client_key("192.0.2.2")
    assert "192.0.2" not in client_key("192.0.2.1")


def test_log_format_setting(monkeypatch):
    assert load().log_format == "text"
    with pytest.raises(ValueError, match="--log-format"):
        load(log_format="yaml")
    monkeypatch.setenv("JOBRUNNER_LOG_FORMAT", "json")
    assert load().log_format == "json"
