"""Hashes and signatures: rebuilt from the status record alone; any change breaks them."""

import copy
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.signing import (
    WorkerKey,
    challenge_message,
    job_hash,
    netstrings,
    result_message,
    verify_record,
)
from jobrunner.wire import Manifest
from support.jobclient import run_job

JOBRUNNER = str(Path(sys.executable).with_name("jobrunner"))


def signed_record(key: WorkerKey) -> dict:
    record = {
        "job_id": "abc",
        "status": "completed",
        "job_hash": "00" * 32,
        "execution_metadata": {
            "cpu_seconds": 0.123,
            "memory_peak_bytes": 4096,
            "exit_code": 0,
            "environment": "default",
        },
        "output_files": {
            "b.txt": {"path": "b.txt", "size_bytes": 2, "sha256_hash": "bb", "type": "file"},
            "a.txt": {"path": "a.txt", "size_bytes": 1, "sha256_hash": "aa", "type": "file"},
        },
        "worker_metadata": {"worker_id": key.worker_id, "signature": None},
        "finished_at": "2026-01-01T00:00:00.000Z",
    }
    record["worker_metadata"]["signature"] = key.sign(result_message(record))
    return record


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> WorkerKey:
    return WorkerKey.load_or_create(tmp_path_factory.mktemp("key") / "worker.key")


def test_key_file_is_private_and_reloaded(tmp_path):
    path = tmp_path / "state" / "worker.key"
    first = WorkerKey.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert WorkerKey.load_or_create(path).worker_id == first.worker_id
    path.chmod(0o644)
    with pytest.raises(PermissionError):
        WorkerKey.load_or_create(path)


def test_signature_round_trip(key):
    assert verify_record(signed_record(key))
    assert verify_record(signed_record(key), trusted_worker_id=key.worker_id)
    other = WorkerKey.load_or_create(Path(f"/tmp/jr-other-{id(key)}.key"))
    Path(f"/tmp/jr-other-{id(key)}.key").unlink()
    assert not verify_record(signed_record(key), trusted_worker_id=other.worker_id)


TAMPERING = [
    ("status", lambda r: r.update(status="failed")),
    ("job_id", lambda r: r.update(job_id="abd")),
    ("job_hash", lambda r: r.update(job_hash="11" * 32)),
    ("exit_code", lambda r: r["execution_metadata"].update(exit_code=1)),
    ("cpu", lambda r: r["execution_metadata"].update(cpu_seconds=0.124)),
    ("memory", lambda r: r["execution_metadata"].update(memory_peak_bytes=4097)),
    ("environment", lambda r: r["execution_metadata"].update(environment="nlp")),
    ("finished_at", lambda r: r.update(finished_at="2026-01-01T00:00:00.001Z")),
    ("output hash", lambda r: r["output_files"]["a.txt"].update(sha256_hash="ab")),
    ("output size", lambda r: r["output_files"]["a.txt"].update(size_bytes=9)),
    ("output removed", lambda r: r["output_files"].pop("b.txt")),
    (
        "output added",
        lambda r: r["output_files"].update(
            {"c": {"path": "c", "size_bytes": 0, "sha256_hash": "", "type": "file"}}
        ),
    ),
    ("worker swapped", lambda r: r["worker_metadata"].update(worker_id="A" * 43 + "=")),
    ("signature garbage", lambda r: r["worker_metadata"].update(signature="!!")),
    ("signature missing", lambda r: r["worker_metadata"].update(signature=None)),
]


@pytest.mark.parametrize(("what", "change"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_any_change_breaks_the_signature(key, what, change):
    record = signed_record(key)
    change(record)
    assert not verify_record(record)


def test_output_order_does_not_matter(key):
    record = signed_record(key)
    reordered = copy.deepcopy(record)
    reordered["output_files"] = dict(reversed(list(record["output_files"].items())))
    assert verify_record(reordered)


def test_challenge_signature_cannot_pass_as_a_result(key):
    record = signed_record(key)
    record["worker_metadata"]["signature"] = key.sign(
        challenge_message(result_message(record).decode())
    )
    assert not verify_record(record)


@given(st.lists(st.text(max_size=8), max_size=5), st.lists(st.text(max_size=8), max_size=5))
def test_netstrings_are_unambiguous(first, second):
    if first != second:
        assert netstrings(*first) != netstrings(*second)


def test_job_hash_depends_on_manifest_and_every_input():
    manifest = Manifest(entrypoint="a.py", interpreter="python")
    base = job_hash(manifest, [("a.py", "11"), ("b", "22")])
    assert base == job_hash(manifest, [("b", "22"), ("a.py", "11")])  # order-free
    assert base != job_hash(manifest, [("a.py", "11"), ("b", "23")])
    assert base != job_hash(manifest, [("a.py", "11"), ("c", "22")])
    assert base != job_hash(
        Manifest(entrypoint="a.py", interpreter="python", args=["x"]), [("a.py", "11"), ("b", "22")]
    )


def test_verify_command_on_a_real_record(server, tmp_path):
    record = run_job(server.url, "open('o.txt','w').write('out')")
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    good = subprocess.run([JOBRUNNER, "verify", str(path)], capture_output=True, text=True)
    assert good.returncode == 0 and good.stdout.startswith("signature valid: job ")
    pinned = subprocess.run(
        [JOBRUNNER, "verify", "--worker-id", "A" * 43 + "=", str(path)],
        capture_output=True,
        text=True,
    )
    assert pinned.returncode == 1
    record["output_files"]["o.txt"]["size_bytes"] += 1
    bad = subprocess.run(
        [JOBRUNNER, "verify", "-"], input=json.dumps(record), capture_output=True, text=True
    )
    assert bad.returncode == 1 and bad.stderr.strip() == "signature INVALID"
    junk = subprocess.run(
        [JOBRUNNER, "verify", "-"], input="not json", capture_output=True, text=True
    )
    assert junk.returncode == 2 and junk.stderr.startswith("jobrunner: not a JSON status record")
