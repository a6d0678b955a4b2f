"""The errors the service raises: domain facts, with no HTTP in them.

Every refusal is a `JobrunnerError` subclass whose message is the `details` a client sees. The HTTP
edge (`node/app.py`, `http_error`) maps each class to a status and an error title once, for the
worker and the pool alike. The lower-case constructors keep call sites short and are what the pool
uses.
"""

from jobrunner.ratelimit import Verdict


class JobrunnerError(Exception):
    """Root of every error the service layer raises on purpose."""

    def __init__(self, details: str | None = None) -> None:
        super().__init__(details or "")
        self.details = details


class InvalidManifest(JobrunnerError):
    """The manifest, or the files it names, cannot be accepted."""


class InvalidFiles(InvalidManifest):
    """An uploaded file or archive entry is refused (the message names the entry). The interface
    has one error for "manifest or files invalid", so it answers `Invalid manifest` as well."""


class JobNotFound(JobrunnerError):
    pass


class FileNotFound(JobrunnerError):
    pass


class JobFinished(JobrunnerError):
    """A cancel of a job that has already finished: its record stands as it was signed."""


class InvalidParameter(JobrunnerError):
    """A query parameter out of its range (`wait`)."""


class TooLarge(JobrunnerError):
    pass


class UploadTimeout(JobrunnerError):
    pass


class RateLimited(JobrunnerError):
    def __init__(self, verdict: Verdict) -> None:
        super().__init__(None)
        self.reason = verdict.reason
        self.retry_after = verdict.retry_after or 1
        self.limit = verdict.limit  # which limit: cpu, concurrent, hourly, streams


class InvalidChallenge(JobrunnerError):
    pass


class ShuttingDown(JobrunnerError):
    pass


class Busy(JobrunnerError):
    """The server holds as much of some kind of work as it takes at once (uploads in progress)."""

    def __init__(self, details: str, retry_after: int = 1, short_of: str = "capacity") -> None:
        super().__init__(details)
        self.retry_after = retry_after
        self.short_of = short_of  # open_files, uploads, streams: what there is no more of


class UpgradeRequired(JobrunnerError):
    """A plain HTTP request where only a WebSocket is served."""


class WorkerUnreachable(JobrunnerError):
    """The pool cannot get an answer from the job's worker (not yet declared lost)."""


class NoWorkerAvailable(JobrunnerError):
    """The pool has no healthy worker that accepts the request."""

    def __init__(self, details: str, retry_after: int | None = None) -> None:
        super().__init__(details)
        self.retry_after = retry_after


class ClusterUnavailable(JobrunnerError):
    """The cluster's store (Valkey/Redis) does not answer: nothing about any job can be said."""


def invalid_manifest(details: str) -> InvalidManifest:
    return InvalidManifest(details)


def invalid_files(details: str) -> InvalidFiles:
    return InvalidFiles(details)


def job_not_found(job_id: str) -> JobNotFound:
    return JobNotFound(job_id)


def job_finished(job_id: str, state: str, failure: str | None) -> JobFinished:
    how = f"{state} ({failure})" if failure else state
    return JobFinished(f"job {job_id} has already finished: {how}")


def file_not_found(path: str) -> FileNotFound:
    return FileNotFound(path)


def too_large(limit_mb: int) -> TooLarge:
    return TooLarge(f"uploads are limited to {limit_mb} MiB")


def rate_limited(verdict: Verdict) -> RateLimited:
    return RateLimited(verdict)


def invalid_challenge() -> InvalidChallenge:
    return InvalidChallenge("the challenge must be 1 to 256 characters")


def shutting_down() -> ShuttingDown:
    return ShuttingDown("the server is shutting down")


def queue_full(limit: int) -> Busy:
    """A place frees as soon as a queued job starts: with a full queue that is every few seconds
    (every slot's jobs end in turn), so the client is asked back in 10."""
    return Busy(f"the queue is full ({limit} jobs); try again shortly", retry_after=10)


def short_of_files() -> Busy:
    """Long-lived work (a stream, an upload) waits while the server has no more than its reserve
    of open files left, so that health checks and short requests are still answered."""
    return Busy(
        "the server is short of open files; try again shortly", retry_after=5, short_of="open_files"
    )
