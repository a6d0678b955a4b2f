"""A job as the server holds it in memory, and its log with live followers."""

import asyncio
import datetime as dt
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from jobrunner.sandbox.workdir import Output
from jobrunner.uploads import InputFile
from jobrunner.wire import (
    ExecutionMetadata,
    Failure,
    JobState,
    Manifest,
    OutputFile,
    StatusRecord,
    WorkerMetadata,
)

LOG_CAP = 10 * 2**20
# A note is cut to this many bytes: one name of 4,096 bytes, control characters escaped, is
# 16 KiB, and one such note per unreadable directory made a log of 158 MB.
NOTE_MAX = 1024
# How far past its cap a log can go: the truncation line, and the last line saying why the job
# stopped (each with its newlines and prefix).
LOG_SLACK = NOTE_MAX + 128
FOLLOWER_LAG = 2**20


def new_job_id() -> str:
    """144 random bits, URL-safe base64: the id is the only capability to a job.

    It never starts with `-` or `_` (one id in 32 would): a command line reads `-x...` as an option.
    Redrawing costs well under a bit of the 144.
    """
    while True:
        job_id = secrets.token_urlsafe(18)
        if job_id[0].isalnum():
            return job_id


def timestamp(moment: dt.datetime | None = None) -> str:
    moment = moment or dt.datetime.now(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class Follower:
    """One live reader of a log. `lagging` is set when it falls too far behind to keep: more
    than FOLLOWER_LAG bytes written since it joined that it has not been sent yet."""

    def __init__(self, joined: int = 0) -> None:
        self.joined = joined
        self.delivered = 0
        self.lagging = asyncio.Event()


class Log:
    """The combined stdout/stderr of a job: capped, appended by the job, read by anyone.

    Every line a job causes counts against the cap: its output and jobrunner's notes about it
    (outputs not listed, say). Past the cap one line says the log was truncated; only the last
    line, why the job stopped, is written after it. So a log holds at most `cap + LOG_SLACK`
    bytes. Appending never waits for readers; a follower that falls more than FOLLOWER_LAG bytes
    behind what it has been sent is flagged so that its connection can be closed.
    """

    def __init__(self, cap: int = LOG_CAP) -> None:
        self.data = bytearray()
        self.cap = cap
        self.truncated = False
        self.closed = False
        self._changed = asyncio.Event()
        self.followers: set[Follower] = set()

    @property
    def room(self) -> int:
        """Bytes that may still be written before the cap (0 once truncated)."""
        return 0 if self.truncated else max(0, self.cap - len(self.data))

    def append(self, chunk: bytes) -> None:
        if self.truncated or self.closed:
            return
        if len(chunk) > self.room:
            self.data += chunk[: self.room]
            self._truncate("; the job continues")
        else:
            self.data += chunk
        self._written()

    def note(self, line: str, keep: int = 0) -> bool:
        """A line from jobrunner itself (cut to NOTE_MAX bytes), if it fits below the cap with
        `keep` bytes to spare; else the log is truncated there. Returns whether it was written."""
        if self.truncated or self.closed:
            return False
        text = self._line(line)
        if len(text) + keep > self.room:
            if len(text) > self.room:
                self._truncate("")
                self._written()
            return False
        self.data += text
        self._written()
        return True

    def last(self, line: str) -> None:
        """The log's last line (why the job stopped, cut to NOTE_MAX bytes): written even past
        the cap, which it can exceed by at most LOG_SLACK bytes, truncation line included."""
        if len(self._line(line)) > self.room:
            self.note(line)  # too long for what is left: truncates the log
        self.data += self._line(line)
        self._written()

    def _line(self, line: str) -> bytes:
        text = line.encode(errors="replace")
        if len(text) > NOTE_MAX:  # whole characters only, then a visible cut
            text = text[: NOTE_MAX - 3].decode(errors="ignore").encode() + b"..."
        prefix = b"" if not self.data or self.data.endswith(b"\n") else b"\n"
        return prefix + b"[jobrunner] " + text + b"\n"

    def _truncate(self, after: str) -> None:
        prefix = "" if not self.data or self.data.endswith(b"\n") else "\n"
        mib = self.cap / 2**20
        self.data += f"{prefix}[jobrunner] log truncated at {mib:g} MiB{after}\n".encode()
        self.truncated = True

    def _written(self) -> None:
        for follower in self.followers:
            if len(self.data) - max(follower.delivered, follower.joined) > FOLLOWER_LAG:
                follower.lagging.set()
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_closed(self) -> None:
        while not self.closed:
            await self._changed.wait()

    async def wait_beyond(self, offset: int) -> None:
        """Return once the log is longer than `offset` or closed."""
        while len(self.data) <= offset and not self.closed:
            await self._changed.wait()


@dataclass
class Job:
    id: str
    client: str  # its rate key (an IPv4 address, an IPv6 network), from the edge
    manifest: Manifest
    inputs: list[InputFile]
    job_hash: str
    directory: Path
    state: JobState = "queued"
    created_at: str = field(default_factory=timestamp)
    started_at: str | None = None
    finished_at: str | None = None
    wall_seconds: float = 0.0
    failure: Failure | None = None
    exit_code: int | None = None
    cpu_seconds: float = 0.0
    memory_peak_bytes: int = 0
    outputs: dict[str, Output] = field(default_factory=dict)
    signature: str | None = None
    log: Log = field(default_factory=Log)
    downloaded: set[str] = field(default_factory=set)
    delete_at: float | None = None  # monotonic time; set when the job finishes
    released: bool = False  # its rate-limit slot was given back
    queued_at: float = 0.0  # the service's clock when it was accepted (for the queue wait)
    stdin: bool = False  # its manifest had stdin, kept beside its inputs (`STDIN_FILE`)
    # Where its unpacked upload (`inputs/`) and stdin wait until it runs: a dir on the sandbox's
    # staging tmpfs, or (None) its own directory on the state dir's disk.
    staged: Path | None = None
    # Set once the record is final and signed: what `GET /status?wait=` and a cancel wait for.
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by a cancel: the runner kills the jail (or never starts it) and the job fails `cancelled`.
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_note: str = ""  # the log's last line when cancelled (by a client, or by a shutdown)
    record_read: bool = False  # its final record was read (by a client or a pool)

    @property
    def upload(self) -> Path:
        """The directory holding its `inputs/` (and stdin) until it runs."""
        return self.staged if self.staged is not None else self.directory

    @property
    def collected(self) -> bool:
        """Finished, its final record read and every output downloaded: a draining server
        holds nothing of it that anyone is still owed."""
        return self.finished and self.record_read and self.downloaded >= self.outputs.keys()

    @property
    def finished(self) -> bool:
        return self.state in ("completed", "failed")

    def record(self, worker_id: str, position: int | None) -> StatusRecord:
        return StatusRecord(
            job_id=self.id,
            status=self.state,
            execution_metadata=ExecutionMetadata(
                cpu_seconds=round(self.cpu_seconds, 3),  # ms, as signed
                memory_peak_bytes=self.memory_peak_bytes,
                exit_code=self.exit_code,
                environment=self.manifest.environment,
            ),
            job_hash=self.job_hash,
            output_files={
                path: OutputFile(path, out.size, out.sha256)
                for path, out in sorted(self.outputs.items())
            },
            worker_metadata=WorkerMetadata(worker_id, self.signature),
            position=position,
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            wall_seconds=round(self.wall_seconds, 3),
            failure=self.failure,
        )
