"""The connection to the cluster's Valkey/Redis, the names of its keys, and the one rule about
failures: any error reaching the store becomes `errors.ClusterUnavailable` (503) within a second.

Key layout (every key starts with the prefix, `jr:` by default):
  seq                  counter: arrival order of jobs
  queue                sorted set: queued job ids by arrival
  clients              set: client keys that have queued jobs
  cq:{client}          list: that client's queued job ids, first in first out
  job:{id}             hash: client, seq, state (queued|claimed|running|finished), hash (the
                       job hash announced at submit), record (the status record as JSON),
                       node and url (who claimed it), ip
  upload:{id}          string: the upload as received (manifest and gzip tarballs) till it starts
  running              hash: claimed or running job id -> node id
  run:{client}         hash: the client's claimed or running job ids -> start time
  held:{client}        sorted set: `id:seconds` of the client's ended jobs, by end time
  log:{id}             stream: the job's log in chunks (field d), then field end = final state
  rl:{client}          hash: active (jobs accepted and not finished)
  rlsub:{client}       sorted set: accepted submits by time (the hourly limit)
  rlcpu:{client}       sorted set: `id:seconds` of CPU used, by time (the CPU limit)
  nodes                hash: node id -> its facts as JSON (url, slots, free, draining)
  alive:{node}         string with a time to live of --lost-after: the node's heartbeat
  allowed              set: the public keys allowed to take jobs (the operator's allowlist)
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from jobrunner import errors

T = TypeVar("T")
PREFIX = "jr:"
# A request to the store that takes longer fails: the interface answers 503 within a second.
TIMEOUT = 0.5
_FAILURES = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError, TimeoutError)


def connect(url: str) -> "aioredis.Redis":
    """A client for redis://, rediss:// (TLS) or unix:// URLs, user and password included."""
    return aioredis.from_url(
        url,
        socket_timeout=TIMEOUT,
        socket_connect_timeout=TIMEOUT,
        health_check_interval=5,
        retry_on_timeout=False,
        decode_responses=False,
    )


class Store:
    """The client and its health: `healthy` is False from the first failed request until one
    succeeds again (the heartbeat tries every half second)."""

    def __init__(self, client: "aioredis.Redis", prefix: str = PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self.healthy = True
        self.healthy_since = time.monotonic()
        self.failed_at = 0.0

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def call(self, work: Awaitable[T]) -> T:
        """`work`'s result, or ClusterUnavailable if the store cannot be reached in time."""
        try:
            async with asyncio.timeout(2 * TIMEOUT):
                result = await work
        except _FAILURES as error:
            self._failed()
            raise errors.ClusterUnavailable(
                f"the cluster's store does not answer ({type(error).__name__})"
            ) from None
        if not self.healthy:
            self.healthy, self.healthy_since = True, time.monotonic()
        return result

    def _failed(self) -> None:
        self.healthy = False
        self.failed_at = time.monotonic()

    def check(self) -> None:
        """503 at once while the store has just failed (no request waits for a timeout); after
        TIMEOUT, a request tries again, as the heartbeat does."""
        if not self.healthy and time.monotonic() - self.failed_at < TIMEOUT:
            raise errors.ClusterUnavailable("the cluster's store does not answer")

    async def ping(self) -> bool:
        with contextlib.suppress(errors.ClusterUnavailable):
            await self.call(self.client.ping())
            return True
        return False

    async def close(self) -> None:
        await self.client.aclose()


@contextlib.asynccontextmanager
async def opened(url: str, prefix: str = PREFIX) -> AsyncIterator[Store]:
    store = Store(connect(url), prefix)
    try:
        yield store
    finally:
        await store.close()


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
