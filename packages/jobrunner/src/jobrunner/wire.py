"""Every structure jobrunner sends or receives, as msgspec Structs (the interface's field names).

Times are RFC 3339 UTC strings with millisecond precision (`2026-01-02T03:04:05.678Z`), kept as text
so that the signed message uses exactly the characters a client reads in the status record.

Decoding is lenient where the interface may grow: unknown fields are ignored (msgspec's default),
and a `status` or `failure` value this version does not know is kept as its string, so an older
client keeps working against a newer server or pool. What we send is typed strictly: code that
builds a record passes a `JobState` and a `Failure`, which mypy checks.
"""

from typing import Annotated, Literal, get_args

import msgspec
from msgspec import Meta, Struct

JobState = Literal["queued", "running", "completed", "failed"]
# Every `failure` a worker or a pool sends. `cancelled`: a client asked (`DELETE /jobs/{id}`)
# before the job finished. The last two come only from a pool: the worker stopped answering, or
# its result did not verify (bad signature, another job's record, wrong types).
Failure = Literal[
    "nonzero_exit",
    "timeout",
    "cpu_limit",
    "memory_limit",
    "storage_limit",
    "output_limit",
    "sandbox_error",
    "environment_error",
    "cancelled",
    "worker_lost",
    "bad_signature",
]
JOB_STATES: tuple[JobState, ...] = get_args(JobState)
FAILURES: tuple[Failure, ...] = get_args(Failure)

# --- manifest (form field `manifest`) -----------------------------------------------------------

# `\Z`, not `$`: Python's `$` also matches before a final newline, and "A\n" is no name.
EnvName = Annotated[str, Meta(pattern=r"^[A-Z_][A-Z0-9_]*\Z", max_length=128)]
Arg = Annotated[str, Meta(max_length=4096)]
Pattern = Annotated[str, Meta(min_length=1, max_length=1024)]
# What the entrypoint reads on its standard input: at most this many bytes once UTF-8 encoded
# (`manifest.parse` counts the bytes; a length in characters would allow 4 MiB of emoji).
STDIN_MAX = 2**20


class Manifest(Struct, forbid_unknown_fields=True, omit_defaults=False):
    """What the client asks for. Types and ranges are checked here; path rules in `manifest.py`."""

    entrypoint: Annotated[str, Meta(min_length=1, max_length=1024)]
    interpreter: str | None = None
    args: Annotated[list[Arg], Meta(max_length=64)] = []
    environment: str = "default"
    outputs: Annotated[list[Pattern], Meta(min_length=1, max_length=64)] = msgspec.field(
        default_factory=lambda: ["**"]
    )
    env: Annotated[dict[EnvName, Annotated[str, Meta(max_length=4096)]], Meta(max_length=64)] = {}
    timeout: Annotated[int, Meta(ge=1, le=300)] = 300
    memory_mb: Annotated[int, Meta(ge=16, le=512)] = 512
    # Text fed to the entrypoint's standard input (UTF-8, NUL included); "" is no input at all.
    # At most STDIN_MAX bytes, checked by `manifest.parse`. Left out of the canonical manifest
    # while empty, so that jobs without stdin keep the hashes they had before it (`job_hash`).
    stdin: str = ""


# --- job status record ---------------------------------------------------------------------------


class ExecutionMetadata(Struct):
    cpu_seconds: float = 0.0
    memory_peak_bytes: int = 0
    exit_code: int | None = None
    environment: str = "default"


class OutputFile(Struct):
    path: str
    size_bytes: int
    sha256_hash: str
    type: Literal["file"] = "file"


class WorkerMetadata(Struct):
    worker_id: str
    signature: str | None = None


class StatusRecord(Struct):
    job_id: str
    status: JobState | str  # a state a newer server adds is kept as text, not refused
    execution_metadata: ExecutionMetadata
    job_hash: str
    output_files: dict[str, OutputFile]
    worker_metadata: WorkerMetadata
    position: int | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    wall_seconds: float
    failure: Failure | str | None  # the same: a newer server's reason is kept as text


class SubmitResult(Struct, omit_defaults=True):
    job_id: str
    status: JobState | str
    position: int
    # What the job's record must carry (a pool or client checks the signed result against it);
    # absent from servers older than 0.2.
    job_hash: str | None = None


# --- outputs listing -----------------------------------------------------------------------------


class FileEntry(Struct, tag_field="type", tag="file"):
    path: str
    size_bytes: int


class DirectoryEntry(Struct, tag_field="type", tag="directory"):
    path: str  # ends with "/"
    files: list[str]


class OutputListing(Struct):
    job_id: str
    outputs: list[FileEntry | DirectoryEntry]


# --- quota, environments, server ----------------------------------------------------------------


class Quota(Struct):
    used: float
    limit: float
    available: float
    active_jobs: int
    can_submit: bool
    reason: str
    retry_after: int | None = None


class SystemStats(Struct):
    queue_length: int
    active_jobs: int


class Stats(Struct):
    your_quota: Quota
    system: SystemStats


class EnvironmentStats(Struct):
    total_templates: int
    cached_environments: int
    total_uses: int
    disk_usage_mb: int


class Environments(Struct):
    templates: list[str]
    stats: EnvironmentStats
    interpreters: list[str]


class ServerInfo(Struct, omit_defaults=True):
    service: str
    status: str
    description: str
    privacy: str
    limits: str
    version: str = ""
    warning: str | None = None


class Health(Struct, omit_defaults=True):
    status: str
    worker_id: str
    challenge_signature: str | None = None


# --- errors ------------------------------------------------------------------------------------


class RateLimitedBody(Struct, omit_defaults=True):
    """A `429`: servekit's `ErrorBody` plus which limit (`reason`) and when to ask again (seconds).
    Its own Struct, not an `ErrorBody` subclass: importing servekit here would load the server's
    libraries into every client."""

    error: str
    reason: str
    retry_after: int
    details: str | None = None


decode_manifest = msgspec.json.Decoder(Manifest).decode
decode_status = msgspec.json.Decoder(StatusRecord).decode
