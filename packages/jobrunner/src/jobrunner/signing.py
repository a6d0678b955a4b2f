"""The worker's identity and what it signs: job hashes, result records and health challenges.

Every signed or hashed message is a sequence of netstrings (`<length>:<bytes>,`, the length in
decimal bytes of UTF-8), so no field can run into another whatever characters it holds, and any
language can rebuild the bytes. A message starts with a domain tag so that a signature over one
kind of message can never be replayed as another. The README ("Signatures") gives the exact
bytes, field by field, for people who verify without this code.

Result message (`jobrunner-result-v2`): every field of a finished status record except
`position` (always null once finished) and the signature itself, see `result_message`.
Challenge message: `jobrunner-challenge-v1`, then the nonce.
Job hash: SHA-256 hex of `jobrunner-job-v1`, the manifest as canonical JSON (keys sorted, all
defaults filled in, `stdin` only when not empty), the number of input files, then for each input
sorted by path: path, sha256.

`check_record` is strict about types: a record whose numbers are strings (or booleans) is refused
even when the characters would rebuild the same message, and it names the field at fault.
"""

import base64
import hashlib
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from jobrunner.wire import Health, Manifest, StatusRecord

RESULT_TAG = "jobrunner-result-v2"  # v1 (0.1) signed fewer fields: see the CHANGELOG
CHALLENGE_TAG = "jobrunner-challenge-v1"
JOB_TAG = "jobrunner-job-v1"
FINISHED = ("completed", "failed")
_canonical = msgspec.json.Encoder(order="sorted")


def netstrings(*fields: str | bytes) -> bytes:
    out = bytearray()
    for item in fields:
        data = item.encode() if isinstance(item, str) else item
        out += b"%d:%s," % (len(data), data)
    return bytes(out)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _millis(seconds: float) -> str:
    # Records carry at most 3 decimals, so seconds * 1000 is within 1e-6 of an integer and every
    # rounding rule (half-even here, half-up in JavaScript) gives the same number.
    return str(round(float(seconds) * 1000))


def canonical_manifest(manifest: Manifest) -> bytes:
    """The manifest as hashed: every field, defaults filled in, keys sorted, except `stdin` while
    it is empty, so that a job without stdin keeps the hash it had before the field existed."""
    fields = msgspec.structs.asdict(manifest)
    if not fields["stdin"]:
        del fields["stdin"]
    return _canonical.encode(fields)


def job_hash(manifest: Manifest, inputs: Iterable[tuple[str, str]]) -> str:
    files = sorted(inputs)
    parts: list[str | bytes] = [JOB_TAG, canonical_manifest(manifest), str(len(files))]
    for path, digest in files:
        parts += [path, digest]
    return hashlib.sha256(netstrings(*parts)).hexdigest()


def result_message(record: StatusRecord | Mapping[str, Any]) -> bytes:
    """The bytes a worker signs, rebuilt from a status record (a Struct or its decoded JSON).

    Fields in this order, each as the record shows it (null as the empty string, integers in
    decimal): the tag, job_id, job_hash, status, failure, exit_code, cpu_seconds as integer
    milliseconds, memory_peak_bytes, environment, created_at, started_at, finished_at,
    wall_seconds as integer milliseconds, worker_id, the number of output files, then for each
    output file sorted by path (code points): path, type, size_bytes, sha256_hash.
    """
    data: Mapping[str, Any] = (
        msgspec.to_builtins(record) if isinstance(record, StatusRecord) else record
    )
    meta = data["execution_metadata"]
    outputs = sorted(data["output_files"].values(), key=lambda entry: entry["path"])
    parts = [
        RESULT_TAG,
        data["job_id"],
        data["job_hash"],
        data["status"],
        _text(data["failure"]),
        _text(meta["exit_code"]),
        _millis(meta["cpu_seconds"]),
        str(int(meta["memory_peak_bytes"])),
        meta["environment"],
        _text(data["created_at"]),
        _text(data["started_at"]),
        _text(data["finished_at"]),
        _millis(data["wall_seconds"]),
        data["worker_metadata"]["worker_id"],
        str(len(outputs)),
    ]
    for entry in outputs:
        parts += [entry["path"], entry["type"], str(int(entry["size_bytes"])), entry["sha256_hash"]]
    return netstrings(*parts)


def challenge_message(nonce: str) -> bytes:
    return netstrings(CHALLENGE_TAG, nonce)


class WorkerKey:
    """The worker's Ed25519 key, kept in the state dir with mode 0600."""

    def __init__(self, signing_key: SigningKey) -> None:
        self._key = signing_key
        self.worker_id = base64.b64encode(bytes(signing_key.verify_key)).decode()

    @classmethod
    def load_or_create(cls, path: Path) -> "WorkerKey":
        if path.exists():
            if path.stat().st_mode & 0o077:
                raise PermissionError(f"{path} must not be readable by others (chmod 600)")
            return cls(SigningKey(base64.b64decode(path.read_bytes().strip())))
        key = SigningKey.generate()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(base64.b64encode(bytes(key)) + b"\n")
        return cls(key)

    def sign(self, message: bytes) -> str:
        return base64.b64encode(self._key.sign(message).signature).decode()

    def health(self, status: str, challenge: str | None) -> "Health":
        """`GET /health`: who we are, and the challenge signed (proof we hold the key)."""
        from jobrunner.errors import invalid_challenge

        if challenge is None:
            return Health(status, self.worker_id)
        if not 1 <= len(challenge) <= 256:
            raise invalid_challenge()
        return Health(status, self.worker_id, self.sign(challenge_message(challenge)))


def verify_signature(worker_id: str, message: bytes, signature: str) -> bool:
    try:
        VerifyKey(base64.b64decode(worker_id, validate=True)).verify(
            message, base64.b64decode(signature, validate=True)
        )
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


class RecordProblem(ValueError):
    """Why a status record does not verify: names the field (and output key) at fault."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if not math.isfinite(value) or value < 0:
        return False
    # Signed as integer milliseconds: a 4th decimal would be a change the signature cannot see.
    millis = value * 1000
    return abs(millis - round(millis)) < 1e-6


_KINDS: dict[str, Callable[[object], bool]] = {
    "string": lambda value: isinstance(value, str),
    "string or null": lambda value: value is None or isinstance(value, str),
    "integer >= 0": _is_count,
    "integer or null": lambda value: value is None or _is_int(value),
    "seconds >= 0 with at most 3 decimals": _is_seconds,
    "object": lambda value: isinstance(value, Mapping),
}


def _expect(where: str, value: object, kind: str) -> None:
    if not _KINDS[kind](value):
        shown = "null" if value is None else f"{type(value).__name__} {value!r:.60}"
        raise RecordProblem(f"{where}: expected {kind}, got {shown}")


def _object(where: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _expect(where, value, "object")
        raise AssertionError("unreachable")
    return value


def _check_types(record: Mapping[str, Any]) -> None:
    """Every field the message is built from has the type the interface gives it."""
    for name in ("job_id", "job_hash", "status", "created_at", "finished_at"):
        _expect(name, record.get(name), "string")
    for name in ("failure", "started_at"):
        _expect(name, record.get(name), "string or null")
    _expect("wall_seconds", record.get("wall_seconds"), "seconds >= 0 with at most 3 decimals")
    if record["status"] not in FINISHED:
        raise RecordProblem(f"status: {record['status']!r} is not finished, so nothing is signed")
    meta = _object("execution_metadata", record.get("execution_metadata"))
    _expect("execution_metadata.exit_code", meta.get("exit_code"), "integer or null")
    _expect(
        "execution_metadata.cpu_seconds",
        meta.get("cpu_seconds"),
        "seconds >= 0 with at most 3 decimals",
    )
    _expect("execution_metadata.memory_peak_bytes", meta.get("memory_peak_bytes"), "integer >= 0")
    _expect("execution_metadata.environment", meta.get("environment"), "string")
    worker = _object("worker_metadata", record.get("worker_metadata"))
    _expect("worker_metadata.worker_id", worker.get("worker_id"), "string")
    _expect("worker_metadata.signature", worker.get("signature"), "string")
    outputs = _object("output_files", record.get("output_files"))
    for key, value in outputs.items():
        where = f"output_files[{key!r}]"
        entry = _object(where, value)
        for name in ("path", "type", "sha256_hash"):
            _expect(f"{where}.{name}", entry.get(name), "string")
        _expect(f"{where}.size_bytes", entry.get("size_bytes"), "integer >= 0")
        if entry["path"] != key:
            raise RecordProblem(f"{where}.path: {entry['path']!r} is not its key")


def check_record(
    record: StatusRecord | Mapping[str, Any],
    trusted_worker_id: str | None = None,
    *,
    job_id: str | None = None,
    job_hash: str | None = None,
) -> None:
    """Raise RecordProblem unless the record is a finished one, validly signed by its worker
    (by `trusted_worker_id` when given), and, when given, for this `job_id` and `job_hash`: a
    record of another job, however well signed, is not an answer about this one."""
    data: Any = msgspec.to_builtins(record) if isinstance(record, StatusRecord) else record
    if not isinstance(data, Mapping):
        raise RecordProblem(f"record: expected object, got {type(data).__name__}")
    _check_types(data)
    if job_id is not None and data["job_id"] != job_id:
        raise RecordProblem(f"job_id: {data['job_id']!r} is another job's, not {job_id!r}")
    if job_hash is not None and data["job_hash"] != job_hash:
        raise RecordProblem(
            f"job_hash: {data['job_hash']!r} is not the hash of the job submitted ({job_hash!r})"
        )
    worker_id = data["worker_metadata"]["worker_id"]
    if trusted_worker_id is not None and worker_id != trusted_worker_id:
        raise RecordProblem(
            f"worker_metadata.worker_id: {worker_id!r} is not the trusted key {trusted_worker_id!r}"
        )
    if not verify_signature(worker_id, result_message(data), data["worker_metadata"]["signature"]):
        raise RecordProblem(
            "worker_metadata.signature: does not match the record (a signed field was changed, "
            "or another key signed it)"
        )


def verify_record(
    record: StatusRecord | Mapping[str, Any],
    trusted_worker_id: str | None = None,
    *,
    job_id: str | None = None,
    job_hash: str | None = None,
) -> bool:
    """True when `check_record` finds nothing wrong."""
    try:
        check_record(record, trusted_worker_id, job_id=job_id, job_hash=job_hash)
    except RecordProblem:
        return False
    return True
