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
  run:{client}         hash: the client's claimed or running job ids -> start (ms since 1970)
  use:{client}         hash: n (how many in run:{client}) and sum (of their starts, ms);
                       held (the ms in held:{client}, summed) and oldest (its first end)
  wake                 list: a token per queued job not yet asked for (at most 128): idle
                       nodes wait on it (BLPOP)
  held:{client}        sorted set: `id:seconds` of the client's ended jobs, by end time
  log:{id}             list: the job's log in chunks (`d` + bytes), then `e` + the final state
  rl:{client}          hash: active (jobs accepted and not finished)
  rlsub:{client}       sorted set: accepted submits by time (the hourly limit)
  rlcpu:{client}       sorted set: `id:seconds` of CPU used, by time (the CPU limit)
  rlcpusum:{client}    float: the seconds in rlcpu:{client}, summed
  nodes                hash: node id -> its facts as JSON (url, slots, free, draining)
  alive:{node}         string with a time to live of --lost-after: the node's heartbeat
  allowed              set: the public keys allowed to take jobs (the operator's allowlist)
  queued_bytes         counter: bytes of the uploads held for queued and claimed jobs
"""

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine
from typing import Any, TypeVar

import hiredis
import redis.asyncio as aioredis
from redis import exceptions as redis_errors

from jobrunner import errors

T = TypeVar("T")
Arg = str | bytes | int | float  # what a command's arguments may be
_pack: Any = hiredis.pack_command  # (its stub takes a tuple of one argument only)
PREFIX = "jr:"
# The heartbeat (twice a second) is the probe: when it is not answered within PROBE_TIMEOUT, or a
# connection is refused, the store is taken as down and every request answers 503 at once, so
# that every endpoint says `Cluster unavailable` within a second of an outage. A request of its
# own may take REQUEST_TIMEOUT (a loaded node's event loop can be slow to read an answer; that
# is no outage of the store, and it fails that request alone).
PROBE_TIMEOUT = 0.75
REQUEST_TIMEOUT = 3.0
_TIMEOUTS = (redis_errors.TimeoutError, TimeoutError)
_FAILURES = (redis_errors.ConnectionError, OSError, *_TIMEOUTS)


# Requests to the store at once: more wait for one to end (within their REQUEST_TIMEOUT) rather
# than fail. The pool holds a few connections more: the heartbeat's probe never waits behind
# requests, and the `done` channel's subscriber keeps one.
MAX_REQUESTS = 256
SPARE_CONNECTIONS = 8


def connect(url: str) -> "aioredis.Redis":
    """A client for redis://, rediss:// (TLS) or unix:// URLs, user and password included.

    No socket timeout and no blocking pool: `Store.call` bounds each request as a whole (its
    wait for a connection, its write and its read) and counts the requests in flight. redis-py
    wraps every write of a client with a socket timeout in `asyncio.wait_for`, a task of its own
    on Python 3.11, and the blocking pool takes a condition and a timer per request: 28 % of the
    CPU of a job's calls to the store (1.46 M instructions against 1.04 M, README)."""
    pool = aioredis.ConnectionPool.from_url(
        url,
        max_connections=MAX_REQUESTS + SPARE_CONNECTIONS,
        socket_timeout=None,  # redis-py's default is 5 s
        socket_connect_timeout=PROBE_TIMEOUT,
        health_check_interval=5,
        retry_on_timeout=False,
        decode_responses=False,
    )
    return aioredis.Redis.from_pool(pool)


def _waited_out(error: BaseException) -> bool:
    """A request that timed out (its wait for a turn included), or found the pool full: it fails
    alone, the store is not down (the probe says when it is)."""
    waited = (*_TIMEOUTS, redis_errors.MaxConnectionsError)
    return isinstance(error, waited) or isinstance(error.__cause__, TimeoutError)


class Store:
    """The client and its health: `healthy` is False from a failed probe (or a refused
    connection) until a request succeeds again."""

    def __init__(
        self,
        client: "aioredis.Redis",
        prefix: str = PREFIX,
        request_timeout: float = REQUEST_TIMEOUT,
        max_requests: int = MAX_REQUESTS,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.request_timeout = request_timeout
        self._requests = asyncio.Semaphore(max_requests)
        self.healthy = True
        self.healthy_since = time.monotonic()
        self.failed_at = 0.0

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def call(self, work: Awaitable[T], probe: bool = False, blocks: float = 0.0) -> T:
        """`work`'s result, or ClusterUnavailable if the store cannot be reached in time:
        PROBE_TIMEOUT for a probe, else `request_timeout` (plus `blocks`, the seconds a
        blocking command such as BLPOP may wait by design), its wait for a turn included."""
        try:
            if probe:
                async with asyncio.timeout(PROBE_TIMEOUT):
                    result = await work
            else:
                async with asyncio.timeout(self.request_timeout + blocks), self._requests:
                    result = await work
        except _FAILURES as error:
            if isinstance(work, Coroutine):  # never started if its turn never came
                work.close()  # (one that ran has ended: a no-op then)
            if probe or not _waited_out(error):
                self._failed()
            raise errors.ClusterUnavailable(
                f"the cluster's store does not answer ({type(error).__name__})"
            ) from None
        if not self.healthy:
            self.healthy, self.healthy_since = True, time.monotonic()
            await self._drop_idle()
        return result

    def script(self, source: str) -> "Script":
        return Script(self, source)

    async def command(self, *args: Arg) -> Any:
        """One command on a pooled connection, packed and its reply parsed by hiredis, without
        redis-py's client layer (response callbacks, retries, metrics: a third of a job's
        client CPU, README). Errors are redis-py's, as from its client."""
        pool: Any = self.client.connection_pool  # redis-py leaves get_connection untyped
        connection = await pool.get_connection()
        try:
            await connection.send_packed_command(_pack(args))
            return await connection.read_response()
        finally:
            await pool.release(connection)

    async def _drop_idle(self) -> None:
        """Close the pooled connections not in use: made before an outage, they may be to a
        store that has since restarted, and the first request to take one would fail (a 503
        after the store is back). They reconnect when next taken."""
        with contextlib.suppress(*_FAILURES):
            await self.client.connection_pool.disconnect(inuse_connections=False)

    def _failed(self) -> None:
        self.healthy = False
        self.failed_at = time.monotonic()

    def check(self) -> None:
        """503 at once while the store has just failed (no request waits for a timeout); after
        PROBE_TIMEOUT, a request tries again, as the heartbeat does."""
        if not self.healthy and time.monotonic() - self.failed_at < PROBE_TIMEOUT:
            raise errors.ClusterUnavailable("the cluster's store does not answer")

    async def ping(self) -> bool:
        with contextlib.suppress(errors.ClusterUnavailable):
            await self.call(self.client.ping(), probe=True)
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


class Script:
    """A Lua script of the cluster, run by its digest with the key prefix as its first argument
    (the scripts name their keys themselves: no KEYS), loaded again if the store forgot it (a
    restarted store has no scripts). Not redis-py's `Script`: this is every job's hot path."""

    def __init__(self, store: Store, source: str) -> None:
        self.store = store
        self.source = source
        self.sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()  # its name

    async def __call__(self, *args: Arg) -> Any:
        store = self.store
        try:
            return await store.command("EVALSHA", self.sha, 0, store.prefix, *args)
        except redis_errors.NoScriptError:
            await store.command("SCRIPT", "LOAD", self.source)
            return await store.command("EVALSHA", self.sha, 0, store.prefix, *args)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
