"""The worker's identity and what it signs: job hashes, result records and health challenges.

Every signed or hashed message is a sequence of netstrings (`<length>:<bytes>,`, the length in
decimal bytes of UTF-8), so no field can run into another whatever characters it holds, and any
language can rebuild the bytes. A message starts with a domain tag so that a signature over one
kind of message can never be replayed as another.

Result message (`jobrunner-result-v1`), fields in this order, each as it appears in the status
record (JSON `null` as the empty string):
  job_id, job_hash, status, exit_code (decimal), cpu_seconds as integer milliseconds
  (round(cpu_seconds * 1000)), memory_peak_bytes (decimal), environment, finished_at,
  worker_id, the number of output files (decimal), then for each output file sorted by path:
  path, size_bytes (decimal), sha256_hash.
Challenge message: `jobrunner-challenge-v1`, then the nonce.
Job hash: SHA-256 hex of `jobrunner-job-v1`, the manifest as canonical JSON (keys sorted, all
defaults filled in), the number of input files, then for each input sorted by path: path, sha256.
"""

import base64
import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from jobrunner.wire import Health, Manifest, StatusRecord

RESULT_TAG = "jobrunner-result-v1"
CHALLENGE_TAG = "jobrunner-challenge-v1"
JOB_TAG = "jobrunner-job-v1"
_canonical = msgspec.json.Encoder(order="sorted")


def netstrings(*fields: str | bytes) -> bytes:
    out = bytearray()
    for item in fields:
        data = item.encode() if isinstance(item, str) else item
        out += b"%d:%s," % (len(data), data)
    return bytes(out)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def job_hash(manifest: Manifest, inputs: Iterable[tuple[str, str]]) -> str:
    files = sorted(inputs)
    parts: list[str | bytes] = [JOB_TAG, _canonical.encode(manifest), str(len(files))]
    for path, digest in files:
        parts += [path, digest]
    return hashlib.sha256(netstrings(*parts)).hexdigest()


def result_message(record: StatusRecord | Mapping[str, Any]) -> bytes:
    """The bytes a worker signs, rebuilt from a status record (a Struct or its decoded JSON)."""
    if isinstance(record, StatusRecord):
        record = msgspec.to_builtins(record)
    meta = record["execution_metadata"]
    outputs = sorted(record["output_files"].values(), key=lambda entry: entry["path"])
    parts = [
        RESULT_TAG,
        record["job_id"],
        record["job_hash"],
        record["status"],
        _text(meta["exit_code"]),
        str(round(float(meta["cpu_seconds"]) * 1000)),
        str(int(meta["memory_peak_bytes"])),
        meta["environment"],
        _text(record["finished_at"]),
        record["worker_metadata"]["worker_id"],
        str(len(outputs)),
    ]
    for entry in outputs:
        parts += [entry["path"], str(int(entry["size_bytes"])), entry["sha256_hash"]]
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


def verify_record(
    record: StatusRecord | Mapping[str, Any], trusted_worker_id: str | None = None
) -> bool:
    """True when the record carries a valid signature by its worker (or by `trusted_worker_id`)."""
    if isinstance(record, StatusRecord):
        record = msgspec.to_builtins(record)
    worker = record.get("worker_metadata") or {}
    signature = worker.get("signature")
    worker_id = worker.get("worker_id")
    if not signature or not worker_id:
        return False
    if trusted_worker_id is not None and worker_id != trusted_worker_id:
        return False
    try:
        message = result_message(record)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    return verify_signature(worker_id, message, signature)
