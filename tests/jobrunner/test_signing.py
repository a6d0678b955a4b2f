"""Hashes and signatures: rebuilt from the status record alone; any change breaks them."""

import base64
import copy
import json
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nacl.signing import VerifyKey

from jobrunner.signing import (
    RecordProblem,
    WorkerKey,
    challenge_message,
    check_record,
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
        "position": None,
        "created_at": "2026-01-01T00:00:00.000Z",
        "started_at": "2026-01-01T00:00:00.100Z",
        "finished_at": "2026-01-01T00:00:01.000Z",
        "wall_seconds": 0.9,
        "failure": None,
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
    ("execution_metadata.exit_code", lambda r: r["execution_metadata"].update(exit_code=1)),
    ("cpu", lambda r: r["execution_metadata"].update(cpu_seconds=0.124)),
    ("memory", lambda r: r["execution_metadata"].update(memory_peak_bytes=4097)),
    ("environment", lambda r: r["execution_metadata"].update(environment="nlp")),
    ("finished_at", lambda r: r.update(finished_at="2026-01-01T00:00:00.001Z")),
    # Signed since v2 (0.2): the failure reason, every timestamp, the wall time, output types.
    ("failure", lambda r: r.update(failure="worker_lost")),
    ("created_at", lambda r: r.update(created_at="2025-01-01T00:00:00.000Z")),
    ("started_at", lambda r: r.update(started_at=None)),
    ("wall_seconds", lambda r: r.update(wall_seconds=0.901)),
    ("output type", lambda r: r["output_files"]["a.txt"].update(type="directory")),
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


# Values that rebuild the very same message bytes but are not what the interface says: a
# verifier that coerces types would accept them (0.1 did). Each is refused, naming the field.
CONFUSIONS = [
    ("execution_metadata.exit_code", lambda r: r["execution_metadata"].update(exit_code="0")),
    ("execution_metadata.exit_code", lambda r: r["execution_metadata"].update(exit_code=False)),
    (
        "execution_metadata.cpu_seconds",
        lambda r: r["execution_metadata"].update(cpu_seconds="0.123"),
    ),
    (
        "execution_metadata.memory_peak_bytes",
        lambda r: r["execution_metadata"].update(memory_peak_bytes=4096.0),
    ),
    (
        "execution_metadata.memory_peak_bytes",
        lambda r: r["execution_metadata"].update(memory_peak_bytes="4096"),
    ),
    (
        "output_files['a.txt'].size_bytes",
        lambda r: r["output_files"]["a.txt"].update(size_bytes="1"),
    ),
    (
        "output_files['a.txt'].size_bytes",
        lambda r: r["output_files"]["a.txt"].update(size_bytes=True),
    ),
    ("wall_seconds", lambda r: r.update(wall_seconds="0.9")),
    # Signed as whole milliseconds: a 4th decimal changes the value without changing the message.
    ("wall_seconds", lambda r: r.update(wall_seconds=r["wall_seconds"] + 0.0004)),
    (
        "execution_metadata.cpu_seconds",
        lambda r: r["execution_metadata"].update(cpu_seconds=0.0004),
    ),
    ("failure", lambda r: r.update(failure=0)),
    ("worker_metadata", lambda r: r.update(worker_metadata=[r["worker_metadata"]])),
    # A listing whose key is not its entry's path: a client indexing by key would be misled.
    (
        "output_files['c.txt'].path",
        lambda r: r["output_files"].update({"c.txt": r["output_files"].pop("a.txt")}),
    ),
]


@pytest.mark.parametrize(
    ("field", "change"), CONFUSIONS, ids=[f"{c[0]}-{n}" for n, c in enumerate(CONFUSIONS)]
)
def test_verify_is_strict_about_types_and_names_the_field(key, field, change):
    record = signed_record(key)
    change(record)
    with pytest.raises(RecordProblem) as problem:
        check_record(record)
    assert str(problem.value).startswith(field + ":")


def test_a_record_of_another_job_or_submission_is_refused(key):
    record = signed_record(key)
    check_record(record, key.worker_id, job_id="abc", job_hash="00" * 32)
    with pytest.raises(RecordProblem, match=r"^job_id: 'abc' is another job's"):
        check_record(record, job_id="abd")
    with pytest.raises(RecordProblem, match=r"^job_hash: "):
        check_record(record, job_id="abc", job_hash="11" * 32)
    with pytest.raises(RecordProblem, match=r"^worker_metadata.worker_id: "):
        check_record(record, "A" * 43 + "=")
    record["execution_metadata"]["cpu_seconds"] = 9.0
    with pytest.raises(RecordProblem, match=r"^worker_metadata.signature: does not match"):
        check_record(record)


def readme_message(record: dict) -> bytes:
    """The result message as the README describes it, written without jobrunner's code."""

    def net(text: str) -> bytes:
        data = text.encode("utf-8")
        return str(len(data)).encode() + b":" + data + b","

    def text(value) -> str:
        return "" if value is None else str(value)

    meta = record["execution_metadata"]
    fields = [
        "jobrunner-result-v2",
        record["job_id"],
        record["job_hash"],
        record["status"],
        text(record["failure"]),
        text(meta["exit_code"]),
        str(round(meta["cpu_seconds"] * 1000)),
        str(meta["memory_peak_bytes"]),
        meta["environment"],
        text(record["created_at"]),
        text(record["started_at"]),
        text(record["finished_at"]),
        str(round(record["wall_seconds"] * 1000)),
        record["worker_metadata"]["worker_id"],
        str(len(record["output_files"])),
    ]
    for path in sorted(record["output_files"]):
        entry = record["output_files"][path]
        fields += [entry["path"], entry["type"], str(entry["size_bytes"]), entry["sha256_hash"]]
    return b"".join(net(field) for field in fields)


def test_the_readme_describes_the_exact_signed_bytes(key):
    record = signed_record(key)
    record["failure"] = "nonzero_exit"
    record["output_files"]["é/ü.txt"] = {
        "path": "é/ü.txt",
        "size_bytes": 3,
        "sha256_hash": "cc",
        "type": "file",
    }
    assert readme_message(record) == result_message(record)
    record["worker_metadata"]["signature"] = key.sign(readme_message(record))
    VerifyKey(base64.b64decode(key.worker_id)).verify(
        readme_message(record), base64.b64decode(record["worker_metadata"]["signature"])
    )
    check_record(record)


@given(
    st.builds(
        Manifest,
        entrypoint=st.text(min_size=1, max_size=20),
        interpreter=st.sampled_from(["python", "bash", None]),
        args=st.lists(st.text(max_size=20), max_size=4),
        env=st.dictionaries(
            st.from_regex(r"[A-Z_][A-Z0-9_]{0,5}", fullmatch=True), st.text(max_size=10), max_size=3
        ),
        outputs=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=3),
    )
)
def test_the_job_hash_manifest_json_is_pythons_canonical_json(manifest):
    """The README says: json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)."""
    as_dict = {name: getattr(manifest, name) for name in manifest.__struct_fields__}
    python = json.dumps(as_dict, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert msgspec.json.Encoder(order="sorted").encode(manifest) == python.encode()


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
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "signature INVALID: worker_metadata.signature: does not match the record "
        "(a signed field was changed, or another key signed it)"
    )
    record["output_files"]["o.txt"]["size_bytes"] = "4"
    typed = subprocess.run(
        [JOBRUNNER, "verify", "-"], input=json.dumps(record), capture_output=True, text=True
    )
    assert typed.stderr.strip() == (
        "signature INVALID: output_files['o.txt'].size_bytes: expected integer >= 0, got str '4'"
    )
    other = subprocess.run(
        [JOBRUNNER, "verify", "--job-id", "someone-else", str(path)],
        capture_output=True,
        text=True,
    )
    assert other.returncode == 1 and "signature INVALID: job_id: " in other.stderr
    junk = subprocess.run(
        [JOBRUNNER, "verify", "-"], input="not json", capture_output=True, text=True
    )
    assert junk.returncode == 2 and junk.stderr.startswith("jobrunner: not a JSON status record")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"job_id": "a", "job_id": "b"}', "the key 'job_id' appears twice in one object"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"wall_seconds": NaN}', "NaN is not a JSON number"),
    ],
    ids=["duplicate-key", "deep", "nan"],
)
def test_verify_reads_the_record_strictly_and_says_why_in_one_line(text, why):
    # A key given twice means two readers may see two records; a deep nesting once crashed
    # `verify` with a traceback.
    done = subprocess.run([JOBRUNNER, "verify", "-"], input=text, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f"jobrunner: not a JSON status record: {why}\n"


def test_the_readme_example_message_is_what_we_sign():
    readme = (Path(__file__).parents[2] / "packages/jobrunner/README.md").read_text()
    example = readme.split("is signed as\n\n```\n", 1)[1].split("\n```", 1)[0]
    record = {
        "job_id": "a",
        "job_hash": "h",
        "status": "completed",
        "failure": None,
        "execution_metadata": {
            "exit_code": 0,
            "cpu_seconds": 0.5,
            "memory_peak_bytes": 1,
            "environment": "default",
        },
        "created_at": "c",
        "started_at": None,
        "finished_at": "f",
        "wall_seconds": 1.25,
        "worker_metadata": {"worker_id": "w"},
        "output_files": {},
    }
    assert result_message(record) == example.encode()
