"""Every endpoint and error row of the interface, against a real server running real jobs."""

import hashlib
import json
import os

import httpx
import pytest

from support.jobclient import HELD, log_of, release, run_job, submit, tarball, wait_finished
from support.servers import wait_until

HELLO = """
import os
print("hello", flush=True)
os.makedirs("out/deep", exist_ok=True)
open("out/result.json", "w").write('{"answer": 42}')
open("out/deep/notes.txt", "w").write("deep")
open("top.csv", "w").write("a,b\\n1,2\\n")
"""


def test_server_information(start_server):
    server = start_server()  # default limits, as the interface states them
    response = httpx.get(f"{server.url}/")
    assert response.status_code == 200
    info = response.json()
    assert info["service"] == "jobrunner" and info["status"] == "running"
    for key in ("description", "privacy", "limits"):
        assert isinstance(info[key], str) and info[key]
    assert "10 CPU-seconds" in info["limits"] and "512 MB" in info["limits"]
    # What a stop does to queued jobs (run within the grace, the rest cancelled): said, too.
    assert "deleted" in info["privacy"] and "cancels those still unfinished" in info["privacy"]
    assert "warning" not in info  # a real sandbox: nothing to warn about


def test_health_and_signed_challenge(server):
    from jobrunner.signing import challenge_message, verify_signature

    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "healthy" and len(health["worker_id"]) == 44
    challenged = httpx.get(f"{server.url}/health", params={"challenge": "nonce-123"}).json()
    assert verify_signature(
        health["worker_id"], challenge_message("nonce-123"), challenged["challenge_signature"]
    )
    assert not verify_signature(
        health["worker_id"], challenge_message("other"), challenged["challenge_signature"]
    )
    too_long = httpx.get(f"{server.url}/health", params={"challenge": "x" * 300})
    assert too_long.status_code == 400 and too_long.json()["error"] == "Invalid challenge"


def test_environments_list_all_six_templates(server):
    listing = httpx.get(f"{server.url}/environments").json()
    assert listing["templates"] == [
        "default",
        "ml-basic",
        "vision",
        "nlp",
        "data-science",
        "scientific",
    ]
    stats = listing["stats"]
    assert stats["total_templates"] == 6 and stats["cached_environments"] >= 1
    assert {"python", "bash"} <= set(listing["interpreters"])


def test_completed_job_status_outputs_and_downloads(server):
    response = submit(server.url, {"main.py": HELLO}, {"entrypoint": "main.py"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    accepted = response.json()
    assert accepted["status"] == "queued" and accepted["position"] >= 1
    assert len(accepted["job_id"]) >= 22  # at least 128 random bits, URL-safe

    record = wait_finished(server.url, accepted["job_id"])
    assert record["status"] == "completed", httpx.get(f"{server.url}/logs/{record['job_id']}").text
    meta = record["execution_metadata"]
    assert meta["exit_code"] == 0 and meta["environment"] == "default"
    assert 0 < meta["cpu_seconds"] < 5 and meta["memory_peak_bytes"] > 1_000_000
    assert record["failure"] is None and record["position"] is None
    assert record["started_at"] and record["finished_at"].endswith("Z")
    assert set(record["output_files"]) == {"out/result.json", "out/deep/notes.txt", "top.csv"}
    entry = record["output_files"]["out/result.json"]
    assert entry == {
        "path": "out/result.json",
        "size_bytes": 14,
        "type": "file",
        "sha256_hash": hashlib.sha256(b'{"answer": 42}').hexdigest(),
    }
    assert record["worker_metadata"]["signature"]

    listing = httpx.get(f"{server.url}/outputs/{record['job_id']}").json()
    assert listing["job_id"] == record["job_id"]
    by_path = {item["path"]: item for item in listing["outputs"]}
    assert by_path["out/"] == {"path": "out/", "type": "directory", "files": ["result.json"]}
    assert by_path["out/deep/"]["files"] == ["notes.txt"]
    assert by_path["top.csv"] == {"path": "top.csv", "type": "file", "size_bytes": 8}
    assert "main.py" not in by_path  # an unchanged input is not an output

    download = httpx.get(f"{server.url}/download/{record['job_id']}/out/result.json")
    assert download.status_code == 200 and download.json() == {"answer": 42}
    assert download.headers["content-type"] == "application/json"
    assert 'filename="result.json"' in download.headers["content-disposition"]
    assert download.headers["x-content-type-options"] == "nosniff"
    csv = httpx.get(f"{server.url}/download/{record['job_id']}/top.csv")
    assert csv.headers["content-type"].startswith("text/csv") and csv.text == "a,b\n1,2\n"


def test_logs_are_plain_text_in_order(server):
    code = "import sys\nfor i in range(5):\n    print(i)\n    print('err', i, file=sys.stderr)\n"
    record = run_job(server.url, code)
    response = httpx.get(f"{server.url}/logs/{record['job_id']}")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    expected = "".join(f"{i}\nerr {i}\n" for i in range(5))
    assert response.text == expected


def test_failed_job_reports_nonzero_exit(server):
    record = run_job(server.url, "import sys\nprint('bad')\nsys.exit(3)\n")
    assert record["status"] == "failed" and record["failure"] == "nonzero_exit"
    assert record["execution_metadata"]["exit_code"] == 3
    assert record["worker_metadata"]["signature"]  # failures are signed too


def test_bash_and_inferred_interpreters(server):
    response = submit(
        server.url,
        {"run.sh": "echo from bash $BASH_VERSION; echo $GREETING"},
        {"entrypoint": "run.sh", "env": {"GREETING": "hi there"}},
    )
    record = wait_finished(server.url, response.json()["job_id"])
    log = httpx.get(f"{server.url}/logs/{record['job_id']}").text
    assert record["status"] == "completed" and log.startswith("from bash 5")
    assert "hi there" in log


def test_args_and_output_patterns(server):
    code = (
        "import sys\nopen('keep.txt','w').write(' '.join(sys.argv[1:]))\n"
        "open('drop.log','w').write('x')\n"
    )
    response = submit(
        server.url,
        {"main.py": code},
        {"entrypoint": "main.py", "args": ["a b", "--c"], "outputs": ["*.txt"]},
    )
    record = wait_finished(server.url, response.json()["job_id"])
    assert set(record["output_files"]) == {"keep.txt"}
    body = httpx.get(f"{server.url}/download/{record['job_id']}/keep.txt").text
    assert body == "a b --c"


def test_status_while_queued_and_running_has_every_field(start_server, state_dir):
    server = start_server("--concurrency", "1", "--rate-concurrent", "10")
    slow = submit(server.url, {"main.py": HELD}, {"entrypoint": "main.py", "timeout": 120}).json()
    queued = submit(server.url, {"main.py": "print(1)"}, {"entrypoint": "main.py"}).json()
    assert queued["position"] == 2 or queued["position"] == 1
    record = httpx.get(f"{server.url}/status/{queued['job_id']}").json()
    assert record["status"] == "queued" and record["position"] == 1
    assert record["execution_metadata"] == {
        "cpu_seconds": 0.0,
        "memory_peak_bytes": 0,
        "exit_code": None,
        "environment": "default",
    }
    assert record["output_files"] == {} and record["worker_metadata"]["signature"] is None
    assert record["started_at"] is None and record["finished_at"] is None
    assert httpx.get(f"{server.url}/logs/{queued['job_id']}").text == ""
    # The running job's log is readable while it runs (it runs until released).
    assert wait_until(lambda: log_of(server.url, slow["job_id"]) == "held\n", timeout=60)
    running = httpx.get(f"{server.url}/status/{slow['job_id']}").json()
    assert running["status"] == "running" and running["started_at"]
    release(server.url, state_dir / "s0", slow["job_id"])
    assert wait_finished(server.url, slow["job_id"])["status"] == "completed"


def test_unknown_job_is_404_everywhere(server):
    for path in ("status", "logs", "outputs"):
        response = httpx.get(f"{server.url}/{path}/no-such-job")
        assert response.status_code == 404
        assert response.json() == {"error": "Job not found", "details": "no-such-job"}
    response = httpx.get(f"{server.url}/download/no-such-job/a.txt")
    assert response.status_code == 404 and response.json()["error"] == "Job not found"


def test_download_only_serves_listed_outputs(server):
    record = run_job(server.url, "open('a.txt','w').write('a')")
    job = record["job_id"]
    for path in (
        "missing.txt",
        "main.py",
        "../../worker.key",
        "%2e%2e/%2e%2e/worker.key",
        "a.txt/..",
        "..%2fworker.key",
        "/etc/passwd",
    ):
        response = httpx.get(f"{server.url}/download/{job}/{path}")
        assert response.status_code == 404, path
        assert response.headers["content-type"] == "application/json"


def test_unknown_route_and_wrong_method(server):
    missing = httpx.get(f"{server.url}/nope")
    assert missing.status_code == 404 and missing.json() == {"error": "Not found"}
    wrong = httpx.get(f"{server.url}/submit")
    assert wrong.status_code == 405 and wrong.json() == {"error": "Method not allowed"}


def test_cors_allows_every_origin(server):
    response = httpx.get(f"{server.url}/stats", headers={"Origin": "https://anywhere.example"})
    assert response.headers["access-control-allow-origin"] == "*"
    preflight = httpx.options(
        f"{server.url}/submit",
        headers={"Origin": "https://anywhere.example", "Access-Control-Request-Method": "POST"},
    )
    assert preflight.status_code == 200


@pytest.mark.parametrize(
    ("manifest", "details"),
    [
        ({}, "Missing required field: entrypoint"),
        ({"entrypoint": "main.py", "colour": "red"}, "Unknown field: colour"),
        ({"entrypoint": "missing.py"}, "entrypoint not found in the upload: missing.py"),
        (
            {"entrypoint": "../main.py"},
            "entrypoint must stay inside the upload (path contains '..'): ../main.py",
        ),
        (
            {"entrypoint": "/main.py"},
            "entrypoint must stay inside the upload (absolute path): /main.py",
        ),
        ({"entrypoint": "main.rb"}, "Missing required field: interpreter"),
        ({"entrypoint": "main.py", "interpreter": "ruby"}, "Unknown interpreter: ruby"),
        ({"entrypoint": "main.py", "environment": "gpu"}, "Unknown environment: gpu"),
        ({"entrypoint": "main.py", "timeout": 301}, "timeout: Expected `int` <= 300"),
        ({"entrypoint": "main.py", "timeout": 0}, "timeout: Expected `int` >= 1"),
        ({"entrypoint": "main.py", "memory_mb": 8}, "memory_mb: Expected `int` >= 16"),
        ({"entrypoint": "main.py", "args": ["x"] * 65}, "args: Expected `array` of length <= 64"),
        ({"entrypoint": "main.py", "env": {"LD_PRELOAD": "x"}}, "not allowed: LD_PRELOAD"),
        ({"entrypoint": "main.py", "env": {"PYTHONHOME": "/x"}}, "not allowed: PYTHONHOME"),
        ({"entrypoint": "main.py", "env": {"lower": "x"}}, "key in env"),
        (
            {"entrypoint": "main.py", "outputs": ["../x"]},
            "outputs pattern must stay inside the upload (path contains '..')",
        ),
        ({"entrypoint": 7}, "entrypoint: Expected `str`, got `int`"),
        ("[]", "Manifest must be a JSON object"),
        ("{not json", "Manifest is not valid JSON"),
    ],
)
def test_manifest_errors_are_400_with_details(server, manifest, details):
    response = submit(server.url, {"main.py": "print(1)"}, manifest)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "Invalid manifest"
    assert details in body["details"]


def test_missing_manifest_and_missing_files(server):
    no_manifest = httpx.post(
        f"{server.url}/submit", files={"files": ("job.tar.gz", tarball({"a.py": "1"}))}
    )
    assert no_manifest.status_code == 400
    assert no_manifest.json()["details"] == "Missing form field: manifest"
    no_files = httpx.post(f"{server.url}/submit", data={"manifest": '{"entrypoint": "a.py"}'})
    assert no_files.status_code == 400
    assert no_files.json() == {
        "error": "Invalid manifest",
        "details": "no files were uploaded (form field `files`)",
    }


def test_plain_file_parts_are_accepted(server):
    response = httpx.post(
        f"{server.url}/submit",
        data={"manifest": '{"entrypoint": "job.py"}'},
        files=[
            ("files", ("job.py", b"import helper\nhelper.hi()\n")),
            ("files", ("helper.py", b"def hi():\n    print('hi')\n")),
        ],
    )
    assert response.status_code == 200, response.text
    record = wait_finished(server.url, response.json()["job_id"])
    assert record["status"] == "completed"


def test_upload_over_the_size_limit_is_413_before_reading_it(server):
    big = b"\0" * (51 * 2**20)
    response = httpx.post(
        f"{server.url}/submit",
        data={"manifest": '{"entrypoint": "a.py"}'},
        files={"files": ("job.tar.gz", big)},
        timeout=30,
    )
    assert response.status_code == 413
    assert response.json()["error"] == "Request too large"


def test_upload_streamed_without_length_is_cut_off(server):
    def chunks():
        boundary = b'--X\r\nContent-Disposition: form-data; name="files"; filename="a.tar.gz"'
        yield boundary + b"\r\n\r\n"
        for _ in range(60):
            yield b"\0" * 2**20

    response = httpx.post(
        f"{server.url}/submit",
        content=chunks(),
        timeout=30,
        headers={"Content-Type": "multipart/form-data; boundary=X"},
    )
    assert response.status_code == 413


def test_status_record_decodes_into_the_wire_struct(server):
    from jobrunner.wire import decode_status

    record = run_job(server.url, "print(1)")
    raw = httpx.get(f"{server.url}/status/{record['job_id']}").content
    decoded = decode_status(raw)
    assert decoded.status == "completed" and json.loads(raw)["job_id"] == decoded.job_id


def test_node_scripts_run_when_the_host_has_node(server):
    from support import require

    require(os.path.exists("/usr/bin/node"), "Node.js at /usr/bin/node (the machine image has it)")
    assert "node" in httpx.get(f"{server.url}/environments").json()["interpreters"]
    response = submit(
        server.url,
        {"main.js": "console.log('from node', process.version)\n"},
        {"entrypoint": "main.js"},
    )
    record = wait_finished(server.url, response.json()["job_id"])
    log = httpx.get(f"{server.url}/logs/{record['job_id']}").text
    assert record["status"] == "completed", log
    assert log.startswith("from node v")
