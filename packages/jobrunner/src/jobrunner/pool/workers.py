"""The pool's workers: the allowlist file (URL, Ed25519 public key, capacity), what the pool
knows of each worker, and its health check: a signed answer to a fresh challenge.

Apart from the coordinator because none of it touches jobs: a check only updates its worker, and
the coordinator decides what a worker's failed checks mean for the jobs on it.
"""

import logging
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import msgspec

from jobrunner.signing import challenge_message, verify_signature

log = logging.getLogger("jobrunner.pool")


class WorkerEntry(msgspec.Struct, forbid_unknown_fields=True):
    url: str
    key: str  # base64 Ed25519 public key: the worker_id it must answer with
    capacity: int = 1


class WorkersFile(msgspec.Struct, forbid_unknown_fields=True):
    worker: list[WorkerEntry]


def load_workers(path: Path) -> list[WorkerEntry]:
    try:
        return msgspec.convert(tomllib.loads(path.read_text()), WorkersFile).worker
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as error:
        raise ValueError(f"{path}: {error}") from None


@dataclass
class Worker:
    entry: WorkerEntry
    healthy: bool = False
    active: int = 0
    problem: str = "not checked yet"
    queue_length: int = 0
    failed_checks: int = 0  # in a row; `lost_after` of them and its jobs are lost
    # Shutting down (its signed `GET /health` says `draining`): it gets no new job, and the pool
    # keeps collecting the records of the jobs it has, which it serves until they are collected.
    draining: bool = False

    @property
    def url(self) -> str:
        return self.entry.url.rstrip("/")

    @property
    def available(self) -> bool:
        """Whether new jobs may go to it."""
        return self.healthy and not self.draining

    @property
    def load(self) -> float:
        return self.active / max(1, self.entry.capacity)


async def check_health(session: aiohttp.ClientSession, worker: Worker) -> None:
    """Ask `worker` to sign a fresh challenge (and, if it does, for its queue length) and note
    what the answer says of it: healthy or why not, draining, failed checks in a row."""
    nonce = secrets.token_urlsafe(24)
    problem = None
    draining = False
    try:
        async with session.get(f"{worker.url}/health", params={"challenge": nonce}) as reply:
            body = await reply.json(content_type=None)
        if not isinstance(body, dict) or body.get("worker_id") != worker.entry.key:
            problem = "answers with a key that is not the allowlisted one"
        elif not verify_signature(
            worker.entry.key,
            challenge_message(nonce),
            str(body.get("challenge_signature") or ""),
        ):
            problem = "failed the signed challenge (it does not hold the key)"
        else:
            draining = body.get("status") == "draining"
            async with session.get(f"{worker.url}/stats") as reply:
                stats = await reply.json(content_type=None)
            worker.queue_length = int(stats.get("system", {}).get("queue_length", 0))
    except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError) as error:
        problem = f"unreachable ({type(error).__name__})"
    was_healthy, was_problem, was_draining = worker.healthy, worker.problem, worker.draining
    worker.healthy, worker.problem = problem is None, problem or ""
    worker.draining = problem is None and draining
    worker.failed_checks = 0 if problem is None else worker.failed_checks + 1
    # A worker restarted between two checks goes from draining straight back to healthy: say
    # so, as for any worker that can take jobs again.
    back = was_draining and worker.healthy and not worker.draining
    if was_healthy != worker.healthy or was_problem != worker.problem or back:
        log.info(
            "worker %s is %s",
            worker.url,
            "healthy" if worker.healthy else f"unhealthy: {problem}",
        )
    if worker.draining and not was_draining:
        log.info(
            "worker %s is draining: no new jobs go to it; the results of its jobs are "
            "collected as they finish",
            worker.url,
        )
