"""Per-client limits (a client: an IPv4 address, an IPv6 network): concurrent jobs, accepted
submits per rolling hour, CPU seconds per minute, and streams (plain and WebSocket logs, downloads)
open at once.

One `verdict()` answers both `POST /submit` and `GET /stats`, so they can never disagree.
CPU use is a ledger of (time, seconds) increments: running jobs report their CPU as they go, and a
job's CPU counts for `cpu_window` seconds after it was used. `retry_after` is exact for the hourly
and CPU limits (the moment enough of the window has expired, if nothing else happens meanwhile).
A concurrency refusal says 1 second: a slot frees whenever a job ends, which cannot be predicted;
so does a refused stream (one frees whenever a reader leaves).

Every method takes the client's rate key, which the HTTP edge derives from its address
(`servekit.rate_key` with `Limits.ipv6_prefix`: an IPv4 address as itself, an IPv6 address as its
/64), so the server and the pool agree; nothing here parses addresses, and the domain layer loads
no HTTP code.
"""

import contextlib
import dataclasses
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    concurrent: int = 2
    per_hour: int = 20
    cpu_seconds: float = 10.0
    cpu_window: float = 60.0
    hour: float = 3600.0
    # How the edge keys IPv6 clients (by network: one host holds a whole /64); see the docstring.
    ipv6_prefix: int = 64
    streams: int = 8  # streams (plain and WebSocket logs, downloads) open at once

    def __post_init__(self) -> None:
        if not 0 <= self.ipv6_prefix <= 128:  # refused at once, not at the first IPv6 client
            raise ValueError(f"an IPv6 prefix length is 0 to 128, not {self.ipv6_prefix}")


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str  # empty when allowed
    retry_after: int | None
    cpu_used: float
    active: int
    limit: str = (
        ""  # the limit that refused (the first, when several): cpu, concurrent, hourly, streams
    )


@dataclass
class _Client:
    active: int = 0
    submits: deque[float] = field(default_factory=deque)
    cpu: deque[tuple[float, float]] = field(default_factory=deque)
    running: dict[str, float] = field(default_factory=dict)  # job id -> CPU reported so far
    streams: int = 0  # streams open

    def idle(self) -> bool:
        return not (self.active or self.submits or self.cpu or self.running or self.streams)


@dataclass(frozen=True)
class Reservation:
    key: str  # the client's rate key (see the module's docstring)
    at: float


class StreamSlot:
    """One open stream (a log or a download) of a client. `close()` gives it back (once,
    however often called)."""

    def __init__(self, limiter: "RateLimiter", key: str) -> None:
        self._limiter: RateLimiter | None = limiter
        self.key = key

    def close(self) -> None:
        if self._limiter is not None:
            self._limiter._close_stream(self.key)
            self._limiter = None


# Clock readings are floats: `t + 60 - now` can come out as 60.0000000000001. Expiry and waits
# both use this tolerance so that "admitted at now + retry_after" holds exactly.
_EPSILON = 1e-6


def _wait(until: float, now: float) -> int:
    return max(1, math.ceil(until - now - _EPSILON))


@dataclass(frozen=True)
class Usage:
    """What a verdict needs of a client's windows as of one moment (expired entries left out):
    a few numbers, however many submits and CPU entries the windows hold. The cluster's store
    works them out in its script, so a submit's round trip does not grow with the client's
    history."""

    active: int
    submits: int  # accepted in the last hour
    # The submit whose expiry admits one more, when `submits` is at the hourly limit or over it.
    must_expire: float | None
    cpu_used: float
    # When the CPU used is at the limit or over it: the time of the entry whose expiry brings it
    # back under the limit.
    cpu_eases: float | None


def _usage(client: _Client, limits: Limits) -> Usage:
    submits = len(client.submits)
    must_expire = None
    if 0 < limits.per_hour <= submits:
        must_expire = client.submits[submits - limits.per_hour]
    cpu_used = sum(amount for _, amount in client.cpu)
    cpu_eases = None
    if cpu_used >= limits.cpu_seconds:
        remaining = cpu_used
        for used_at, amount in client.cpu:
            remaining -= amount
            if remaining < limits.cpu_seconds:
                cpu_eases = used_at
                break
    return Usage(client.active, submits, must_expire, cpu_used, cpu_eases)


def judge(limits: Limits, now: float, usage: Usage) -> Verdict:
    """The verdict for a client with this usage at `now`: the one wording and the one set of
    waits, for the embedded limiter and the cluster's alike."""
    reasons: list[str] = []
    limits_hit: list[str] = []
    waits: list[int] = []
    if usage.cpu_used >= limits.cpu_seconds:
        limits_hit.append("cpu")
        reasons.append(
            f"CPU quota exhausted: {usage.cpu_used:.1f}/{limits.cpu_seconds:g} "
            f"CPU-seconds in the last {limits.cpu_window:g} s"
        )
        if usage.cpu_eases is not None:
            waits.append(_wait(usage.cpu_eases + limits.cpu_window, now))
    if usage.active >= limits.concurrent:
        limits_hit.append("concurrent")
        reasons.append(f"Concurrent job limit reached: {usage.active}/{limits.concurrent} jobs")
        waits.append(1)
    if usage.submits >= limits.per_hour:
        limits_hit.append("hourly")
        reasons.append(
            f"Hourly limit reached: {usage.submits}/{limits.per_hour} submits in the last hour"
        )
        if usage.must_expire is None:
            waits.append(math.ceil(limits.hour))  # a limit of 0: never (say so hourly)
        else:
            waits.append(_wait(usage.must_expire + limits.hour, now))
    return Verdict(
        not reasons,
        "; ".join(reasons),
        max(waits) if waits else None,
        round(float(usage.cpu_used), 3),
        usage.active,
        limits_hit[0] if limits_hit else "",
    )


class RateLimiter:
    def __init__(
        self, limits: Limits = Limits(), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self.clock = clock
        self._clients: dict[str, _Client] = {}

    def _client(self, key: str) -> _Client:
        return self._clients.setdefault(key, _Client())

    def _expire(self, client: _Client, now: float) -> None:
        while client.submits and now - client.submits[0] >= self.limits.hour - _EPSILON:
            client.submits.popleft()
        while client.cpu and now - client.cpu[0][0] >= self.limits.cpu_window - _EPSILON:
            client.cpu.popleft()

    def verdict(self, key: str) -> Verdict:
        now = self.clock()
        client = self._clients.get(key) or _Client()
        self._expire(client, now)
        return judge(self.limits, now, _usage(client, self.limits))

    def reserve(self, key: str) -> Verdict | Reservation:
        """Take a slot for a submit being validated, or say why not. Cancel it if it fails."""
        verdict = self.verdict(key)
        if not verdict.allowed:
            return verdict
        now = self.clock()
        client = self._client(key)
        client.active += 1
        client.submits.append(now)
        return Reservation(key, now)

    def cancel(self, reservation: Reservation) -> None:
        """The submit was invalid: it counts neither as active nor against the hourly limit."""
        client = self._client(reservation.key)
        client.active -= 1
        with contextlib.suppress(ValueError):  # already expired
            client.submits.remove(reservation.at)
        self._forget_if_idle(reservation.key)

    def open_stream(self, key: str) -> Verdict | StreamSlot:
        """A slot for one stream (a log, plain or WebSocket, or a download), or why not: at most
        `streams` at once."""
        client = self._client(key)
        if client.streams >= self.limits.streams:
            held = f"{client.streams}/{self.limits.streams}"
            return dataclasses.replace(
                self.verdict(key),
                allowed=False,
                reason=f"Too many streams (logs, downloads and long polls): {held} open",
                retry_after=1,
                limit="streams",
            )
        client.streams += 1
        return StreamSlot(self, key)

    def open_streams(self, key: str) -> int:
        client = self._clients.get(key)
        return client.streams if client else 0

    def streams_open(self) -> int:
        """Streams open now, of every client."""
        return sum(client.streams for client in self._clients.values())

    def _close_stream(self, key: str) -> None:
        client = self._clients.get(key)
        if client is not None:
            client.streams = max(0, client.streams - 1)
            self._forget_if_idle(key)

    def cpu_used(self, key: str, job_id: str, total: float) -> None:
        """A job's CPU so far (called while it runs and once when it ends)."""
        client = self._client(key)
        delta = total - client.running.get(job_id, 0.0)
        client.running[job_id] = max(total, client.running.get(job_id, 0.0))
        if delta > 0:
            client.cpu.append((self.clock(), delta))

    def charge(self, key: str, seconds: float) -> None:
        """CPU the server spent for this client outside its jobs (unpacking its upload, refused or
        not): it counts against the client's CPU quota like a job's, for `cpu_window` seconds."""
        if seconds > 0:
            self._client(key).cpu.append((self.clock(), seconds))
            self._forget_if_idle(key)

    def finished(self, key: str, job_id: str) -> None:
        client = self._client(key)
        client.active = max(0, client.active - 1)
        client.running.pop(job_id, None)
        self._forget_if_idle(key)

    def _forget_if_idle(self, key: str) -> None:
        client = self._clients.get(key)
        if client is not None:
            self._expire(client, self.clock())
            if client.idle():
                del self._clients[key]

    def sweep(self) -> None:
        """Drop clients with nothing left in any window (bounded memory under many addresses)."""
        for key in list(self._clients):
            self._forget_if_idle(key)
