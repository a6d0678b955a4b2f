"""The per-client rate limits of `jobrunner.ratelimit`, counted in the store so that a client has
the same limits whichever node it reaches: one Lua script reads the client's counts and, if they
allow it, takes the slot, atomically. The verdict (its reasons and Retry-After) is then worked out
by `ratelimit.judge` from those counts, as the embedded limiter's is, so the words and waits are
the same. The script answers with the few numbers a verdict needs, not the client's history: a
client with thousands of submits in its hour costs a submit no more than one with none.

Counted here: concurrent jobs (accepted, not finished), accepted submits per hour, CPU seconds per
window (a job's CPU counts when it ends; the CPU of unpacking an upload when it is unpacked).
Streams open at once stay per node (a stream is a connection to that node).

A reservation also checks the cluster queue's bound (`--max-queue`) in the same script, before
the client's slot is taken: a submit asks the store once before its upload is read, and a full
queue is refused before the client's limits, as in the embedded mode. The bound is checked
again, atomically, when the job is queued (`queue.py`): uploads admitted together may fill it.
"""

import secrets
from dataclasses import dataclass

from jobrunner import errors
from jobrunner.cluster.store import Store, text
from jobrunner.ratelimit import Limits, Usage, Verdict, judge

# The CPU limit's entries (`rlcpu:{client}`, `id:seconds` by time) and their running sum
# (`rlcpusum:{client}`), so that a verdict reads one number, not one entry per job in the window.
# Every script that charges CPU uses `charge_cpu` (here and the queue's finish); `cpu_spent`
# expires what left the window first. A sum missing beside entries (a store written before the
# sum existed) is counted once from the entries.
CPU_LEDGER = """
local function cpu_amount(member) return tonumber(string.match(member, ':([^:]+)$')) end
local function charge_cpu(p, c, member, seconds, window, now)
  local entries, sum = p .. 'rlcpu:' .. c, p .. 'rlcpusum:' .. c
  if redis.call('ZADD', entries, now, member) == 1 then
    redis.call('INCRBYFLOAT', sum, seconds)
  end
  redis.call('EXPIRE', entries, math.ceil(window))
  redis.call('EXPIRE', sum, math.ceil(window))
end
local function cpu_spent(p, c, window, now)
  local entries, sum = p .. 'rlcpu:' .. c, p .. 'rlcpusum:' .. c
  local cutoff = now - window + 1e-6  -- ratelimit._expire's tolerance for clock readings
  if redis.call('EXISTS', sum) == 0 then
    local total = 0
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', entries, cutoff, '+inf')) do
      total = total + cpu_amount(m)
    end
    redis.call('ZREMRANGEBYSCORE', entries, '-inf', cutoff)
    if total > 0 then
      redis.call('SET', sum, string.format('%.17g', total))
      redis.call('EXPIRE', sum, math.ceil(window))
    end
    return total
  end
  local expired = redis.call('ZRANGEBYSCORE', entries, '-inf', cutoff)
  if #expired > 0 then
    local gone = 0
    for _, m in ipairs(expired) do gone = gone + cpu_amount(m) end
    redis.call('ZREMRANGEBYSCORE', entries, '-inf', cutoff)
    if redis.call('EXISTS', entries) == 0 then
      redis.call('DEL', sum)  -- no rounding left behind by the running sum
      return 0
    end
    redis.call('INCRBYFLOAT', sum, -gone)
  end
  return tonumber(redis.call('GET', sum) or '0')
end
"""

# ARGV: prefix, client, concurrent, per_hour, cpu_limit, cpu_window, hour, take (1/0), token,
# max_queue (0: not checked). Returns {-1} if the queue holds max_queue jobs (nothing taken);
# else what `ratelimit.Usage` holds (floats as text: Lua numbers would come back truncated):
# now, active, submits in the hour, the submit that must expire ('' if none), CPU used, the CPU
# entry whose expiry eases the limit ('' if none). A few values, however long the history.
_RESERVE = (
    CPU_LEDGER
    + """
local p, c = ARGV[1], ARGV[2]
local max_queue = tonumber(ARGV[10])
if max_queue > 0 and redis.call('ZCARD', p .. 'queue') >= max_queue then return {-1} end
local per_hour, cpu_limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local sub = p .. 'rlsub:' .. c
-- expired as ratelimit._expire does, with its tolerance for clock readings
redis.call('ZREMRANGEBYSCORE', sub, '-inf', now - tonumber(ARGV[7]) + 1e-6)
local active = tonumber(redis.call('HGET', p .. 'rl:' .. c, 'active') or '0')
local submits = redis.call('ZCARD', sub)
local must_expire = ''
if per_hour > 0 and submits >= per_hour then
  must_expire = redis.call('ZRANGE', sub, submits - per_hour, submits - per_hour, 'WITHSCORES')[2]
end
local spent = cpu_spent(p, c, tonumber(ARGV[6]), now)
local eases = ''
if spent >= cpu_limit then  -- refused: walk the entries for the moment the limit eases
  local used = redis.call('ZRANGE', p .. 'rlcpu:' .. c, 0, -1, 'WITHSCORES')
  local remaining = spent
  for i = 1, #used, 2 do
    remaining = remaining - cpu_amount(used[i])
    if remaining < cpu_limit then eases = used[i + 1]; break end
  end
end
if spent < cpu_limit and active < tonumber(ARGV[3]) and submits < per_hour and ARGV[8] == '1' then
  redis.call('HINCRBY', p .. 'rl:' .. c, 'active', 1)
  redis.call('ZADD', sub, now, ARGV[9])
  redis.call('EXPIRE', sub, math.ceil(tonumber(ARGV[7])))
end
return {string.format('%.17g', now), active, submits, must_expire,
  string.format('%.17g', spent), eases}
"""
)

# ARGV: prefix, client, token
_CANCEL = """
local p, c = ARGV[1], ARGV[2]
local active = tonumber(redis.call('HINCRBY', p .. 'rl:' .. c, 'active', -1))
if active < 0 then redis.call('HSET', p .. 'rl:' .. c, 'active', 0) end
redis.call('ZREM', p .. 'rlsub:' .. c, ARGV[3])
return 1
"""

# ARGV: prefix, client, what, seconds, window
_CHARGE = (
    CPU_LEDGER
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
charge_cpu(ARGV[1], ARGV[2], ARGV[3] .. ':' .. ARGV[4], tonumber(ARGV[4]), tonumber(ARGV[5]), now)
return 1
"""
)


def _optional(value: bytes | str) -> float | None:
    return float(text(value)) if value else None


@dataclass(frozen=True)
class Reservation:
    key: str
    token: str


class ClusterLimits:
    def __init__(self, store: Store, limits: Limits) -> None:
        self.store = store
        self.limits = limits
        self._reserve = store.script(_RESERVE)
        self._cancel = store.script(_CANCEL)
        self._charge = store.script(_CHARGE)

    async def _counts(self, key: str, take: bool, max_queue: int = 0) -> tuple[Verdict, str]:
        """`key`: the client's rate key, from the HTTP edge (an IPv4 address, an IPv6 /64).
        `errors.queue_full` if the cluster's queue holds `max_queue` jobs (0: not checked)."""
        token = secrets.token_hex(8)
        lim = self.limits
        found = await self.store.call(
            self._reserve(
                key,
                lim.concurrent,
                lim.per_hour,
                lim.cpu_seconds,
                lim.cpu_window,
                lim.hour,
                int(take),
                token,
                max_queue,
            )
        )
        if len(found) == 1:  # {-1}: the queue is full
            raise errors.queue_full(max_queue)
        usage = Usage(
            active=int(found[1]),
            submits=int(found[2]),
            must_expire=_optional(found[3]),
            cpu_used=float(text(found[4])),
            cpu_eases=_optional(found[5]),
        )
        # The embedded verdict, from the store's counts as of the store's clock.
        return judge(lim, float(text(found[0])), usage), token

    async def verdict(self, key: str) -> Verdict:
        return (await self._counts(key, take=False))[0]

    async def reserve(self, key: str, max_queue: int = 0) -> Verdict | Reservation:
        """A slot for one submit of the client, or the verdict that refuses it; first of all
        `errors.queue_full` if the cluster's queue holds `max_queue` jobs (0: not checked)."""
        verdict, token = await self._counts(key, take=True, max_queue=max_queue)
        return Reservation(key, token) if verdict.allowed else verdict

    async def cancel(self, reservation: Reservation) -> None:
        await self.store.call(self._cancel(reservation.key, reservation.token))

    async def charge(self, ip_key: str, what: str, seconds: float) -> None:
        """CPU spent for the client (`what`: a job id, or the unpacking of an upload)."""
        if seconds > 0:
            charge = self._charge(ip_key, what, f"{seconds:.6f}", self.limits.cpu_window)
            await self.store.call(charge)
