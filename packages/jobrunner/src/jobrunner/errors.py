"""The errors the service raises, each already in the interface's JSON error body shape."""

from jobrunner.ratelimit import Verdict
from servekit import HTTPError


def invalid_manifest(details: str) -> HTTPError:
    return HTTPError(400, "Invalid manifest", details)


def invalid_files(details: str) -> HTTPError:
    return HTTPError(400, "Invalid files", details)


def job_not_found(job_id: str) -> HTTPError:
    return HTTPError(404, "Job not found", job_id)


def file_not_found(path: str) -> HTTPError:
    return HTTPError(404, "File not found", path)


def too_large(limit_mb: int) -> HTTPError:
    return HTTPError(413, "Request too large", f"uploads are limited to {limit_mb} MiB")


def rate_limited(verdict: Verdict) -> HTTPError:
    wait = verdict.retry_after or 1
    return HTTPError(
        429,
        "Rate limit exceeded",
        reason=verdict.reason,
        retry_after=wait,
        headers={"Retry-After": str(wait)},
    )


def invalid_challenge() -> HTTPError:
    return HTTPError(400, "Invalid challenge", "the challenge must be 1 to 256 characters")


def shutting_down() -> HTTPError:
    return HTTPError(
        503, "Service unavailable", "the server is shutting down", headers={"Retry-After": "30"}
    )
