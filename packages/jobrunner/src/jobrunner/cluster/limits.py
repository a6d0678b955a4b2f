"""The per-client rate limits of `jobrunner.ratelimit`, counted in the store so that a client has
the same limits whichever node it reaches: one Lua script reads the client's counts and, if they
allow it, takes the slot, atomically. The verdict (its reasons and Retry-After) is then worked out
by `RateLimiter.verdict` itself from those counts, so the words and waits are the embedded ones.

Counted here: concurrent jobs (accepted, not finished), accepted submits per hour, CPU seconds per
window (a job's CPU counts when it ends; the CPU of unpacking an upload when it is unpacked).
Streams open at once stay per node (a stream is a connection to that node).
"""

import secrets
from collections import deque
from dataclasses import dataclass

from jobrunner import ratelimit
from jobrunner.cluster.store import Store, text
from jobrunner.ratelimit import Limits, RateLimiter, Verdict

# ARGV: prefix, client, concurrent, per_hour, cpu_limit, cpu_window, hour, take (1/0), token
_RESERVE = """
local p, c = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local sub, cpu = p .. 'rlsub:' .. c, p .. 'rlcpu:' .. c
redis.call('ZREMRANGEBYSCORE', sub, '-inf', now - tonumber(ARGV[7]))
redis.call('ZREMRANGEBYSCORE', cpu, '-inf', now - tonumber(ARGV[6]))
local active = tonumber(redis.call('HGET', p .. 'rl:' .. c, 'active') or '0')
local submits = redis.call('ZRANGE', sub, 0, -1, 'WITHSCORES')
local used = redis.call('ZRANGE', cpu, 0, -1, 'WITHSCORES')
local spent = 0
for i = 1, #used, 2 do spent = spent + tonumber(string.match(used[i], ':([^:]+)$')) end
local allowed = spent < tonumber(ARGV[5]) and active < tonumber(ARGV[3])
  and #submits / 2 < tonumber(ARGV[4])
if allowed and ARGV[8] == '1' then
  redis.call('HINCRBY', p .. 'rl:' .. c, 'active', 1)
  redis.call('ZADD', sub, now, ARGV[9])
  redis.call('EXPIRE', sub, math.ceil(tonumber(ARGV[7])))
end
return {tostring(now), tostring(active), submits, used}
"""

# ARGV: prefix, client, token
_CANCEL = """
local p, c = ARGV[1], ARGV[2]
local active = tonumber(redis.call('HINCRBY', p .. 'rl:' .. c, 'active', -1))
if active < 0 then redis.call('HSET', p .. 'rl:' .. c, 'active', 0) end
redis.call('ZREM', p .. 'rlsub:' .. c, ARGV[3])
return 1
"""

# ARGV: prefix, client, what, seconds, window
_CHARGE = """
local p, c = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', p .. 'rlcpu:' .. c, now, ARGV[3] .. ':' .. ARGV[4])
redis.call('EXPIRE', p .. 'rlcpu:' .. c, math.ceil(tonumber(ARGV[5])))
return 1
"""


@dataclass(frozen=True)
class Reservation:
    key: str
    token: str


class ClusterLimits:
    def __init__(self, store: Store, limits: Limits) -> None:
        self.store = store
        self.limits = limits
        self._reserve = store.client.register_script(_RESERVE)
        self._cancel = store.client.register_script(_CANCEL)
        self._charge = store.client.register_script(_CHARGE)

    async def _counts(self, key: str, take: bool) -> tuple[Verdict, str]:
        """`key`: the client's rate key, from the HTTP edge (an IPv4 address, an IPv6 /64)."""
        token = secrets.token_hex(8)
        lim = self.limits
        found = await self.store.call(
            self._reserve(
                args=[
                    self.store.prefix,
                    key,
                    lim.concurrent,
                    lim.per_hour,
                    lim.cpu_seconds,
                    lim.cpu_window,
                    lim.hour,
                    int(take),
                    token,
                ]
            )
        )
        now = float(text(found[0]))
        submits = [float(text(found[2][i + 1])) for i in range(0, len(found[2]), 2)]
        cpu = [
            (float(text(found[3][i + 1])), float(text(found[3][i]).rpartition(":")[2]))
            for i in range(0, len(found[3]), 2)
        ]
        # The embedded verdict, from the store's counts as of the store's clock.
        judge = RateLimiter(lim, clock=lambda: now)
        judge._clients[key] = ratelimit._Client(
            active=int(text(found[1])), submits=deque(submits), cpu=deque(cpu)
        )
        return judge.verdict(key), token

    async def verdict(self, key: str) -> Verdict:
        return (await self._counts(key, take=False))[0]

    async def reserve(self, key: str) -> Verdict | Reservation:
        verdict, token = await self._counts(key, take=True)
        return Reservation(key, token) if verdict.allowed else verdict

    async def cancel(self, reservation: Reservation) -> None:
        await self.store.call(
            self._cancel(args=[self.store.prefix, reservation.key, reservation.token])
        )

    async def charge(self, ip_key: str, what: str, seconds: float) -> None:
        """CPU spent for the client (`what`: a job id, or the unpacking of an upload)."""
        if seconds > 0:
            args: list[str | float] = [
                self.store.prefix,
                ip_key,
                what,
                f"{seconds:.6f}",
                self.limits.cpu_window,
            ]
            await self.store.call(self._charge(args=args))
