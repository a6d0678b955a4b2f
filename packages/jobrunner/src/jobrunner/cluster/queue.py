"""The cluster's one queue, in Valkey/Redis: every change is one Lua script, so that two nodes can
never claim the same job, and a job is always in exactly one of: queued, claimed (by a node, its
start not written yet: its upload is still kept), running, finished.

Scheduling, cluster-wide and faithful to `jobrunner.scheduling` in its main rule: a free slot
takes the head job of the client whose jobs held the least slot time over the last `window`
seconds (ended jobs whose end is in the window count whole; claimed and running ones count from
their start to now), ties broken by arrival; within a client, first in first out. Simplified: no
slots are reserved for short jobs (a node's slots are its own business; the queue is shared).
A job's `position` is its rank in that order as of now (1 for the next job to start anywhere).
Time is the store's (`TIME`): one clock for every node.
"""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobrunner.cluster.limits import CPU_LEDGER
from jobrunner.cluster.store import Arg, Script, Store, text

_PRELUDE = """
local p = ARGV[1]
local WAKE_MAX = 128
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
-- The fair share's times are whole milliseconds, summed with HINCRBY: exact (no rounding left
-- behind by running sums), and exact in Lua's doubles too (a count of running jobs times the
-- time stays under 2^53 up to thousands of jobs).
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function usage(c, window)  -- in milliseconds
  local use, cutoff = p .. 'use:' .. c, now_ms - window * 1000
  local u = redis.call('HMGET', use, 'held', 'oldest', 'n', 'sum')
  local total = tonumber(u[1] or '0')
  if u[2] and tonumber(u[2]) <= cutoff then
    -- the oldest ended job has left the window: take out all that have (one read of the
    -- hash on every other call, not a search of the set)
    local held, gone = p .. 'held:' .. c, 0
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', held, '-inf', cutoff)) do
      gone = gone + tonumber(string.match(m, ':([^:]+)$'))
    end
    redis.call('ZREMRANGEBYSCORE', held, '-inf', cutoff)
    local first = redis.call('ZRANGE', held, 0, 0, 'WITHSCORES')
    if #first == 0 then
      total = 0
      redis.call('HDEL', use, 'held', 'oldest')  -- no rounding left behind by the running sum
    else
      total = redis.call('HINCRBY', use, 'held', -gone)
      redis.call('HSET', use, 'oldest', first[2])
    end
  end
  -- the claimed and running jobs, from now to their start: kept as a count and a running sum
  -- of their starts (one read, however many jobs the client runs)
  if u[3] then total = total + math.max(0, tonumber(u[3]) * now_ms - tonumber(u[4])) end
  return total
end
-- use:{c} and held:{c} live while the client has a job claimed or running, and expire
-- together `window` after the last one ended (a client who never comes back leaves nothing)
local function running(c, id)
  local use = p .. 'use:' .. c
  redis.call('HSET', p .. 'run:' .. c, id, now_ms)
  if redis.call('HINCRBY', use, 'n', 1) == 1 then
    redis.call('PERSIST', use)
    redis.call('PERSIST', p .. 'held:' .. c)
  end
  redis.call('HINCRBY', use, 'sum', now_ms)
end
local function ran(c, id)  -- the job's start, or nil if it was not claimed or running
  local start = redis.call('HGET', p .. 'run:' .. c, id)
  if not start then return nil end
  redis.call('HDEL', p .. 'run:' .. c, id)
  local use = p .. 'use:' .. c
  if redis.call('HINCRBY', use, 'n', -1) <= 0 then
    redis.call('HDEL', use, 'n', 'sum')  -- no rounding left behind by the running sum
  else
    redis.call('HINCRBY', use, 'sum', -tonumber(start))
  end
  return start
end
local function idle_expiry(c, window)  -- after `ran`: the client runs nothing now?
  local use = p .. 'use:' .. c
  if redis.call('HEXISTS', use, 'n') == 0 then
    redis.call('EXPIRE', use, math.ceil(window))
    redis.call('EXPIRE', p .. 'held:' .. c, math.ceil(window))
  end
end
local function position(id, window, seq, mine)  -- seq and client: read if not given
  seq = seq or redis.call('ZSCORE', p .. 'queue', id)
  if not seq then return -1 end
  mine = mine or redis.call('HGET', p .. 'job:' .. id, 'client')
  local own = usage(mine, window)
  local ahead = redis.call('ZRANK', p .. 'cq:' .. mine, id) or 0
  for _, c in ipairs(redis.call('SMEMBERS', p .. 'clients')) do
    if c ~= mine then
      local u = usage(c, window)
      if u < own then
        ahead = ahead + redis.call('ZCARD', p .. 'cq:' .. c)
      elseif u == own then
        -- the jobs of c that came before this one: a client's queue is sorted by arrival
        ahead = ahead + redis.call('ZCOUNT', p .. 'cq:' .. c, '-inf', '(' .. seq)
      end
    end
  end
  return ahead
end
-- A token in `wake` for each queued job not yet asked for (at most WAKE_MAX): each idle node
-- blocks on it (BLPOP), so as many idle nodes wake at once as there are jobs to claim. Kept in
-- O(1): a job queued adds one token; a job claimed or cancelled takes one back if there are
-- more tokens than queued jobs. A token already taken by a node on its way to claim is not
-- handed out again (counting it as missing woke a herd of nodes for one job). A claim that
-- finds nothing clears what is left (a token taken by a node that died: the IDLE safety net).
local function wake_queued()
  if redis.call('LLEN', p .. 'wake') < WAKE_MAX then redis.call('RPUSH', p .. 'wake', '1') end
end
local function wake_taken()
  local queued = redis.call('ZCARD', p .. 'queue')
  local have = redis.call('LLEN', p .. 'wake')
  if have > queued then
    redis.call('LPOP', p .. 'wake')
  elseif have < WAKE_MAX and queued >= WAKE_MAX then
    redis.call('RPUSH', p .. 'wake', '1')  -- beyond the cap, more jobs than nodes on their way
  end
end
local function claim(node, url, window)
  if redis.call('SISMEMBER', p .. 'allowed', node) == 0 then return {-1} end
  local best, best_id, best_u, best_s = nil, nil, nil, nil
  for _, c in ipairs(redis.call('SMEMBERS', p .. 'clients')) do
    local head = redis.call('ZRANGE', p .. 'cq:' .. c, 0, 0, 'WITHSCORES')
    if #head == 0 then
      redis.call('SREM', p .. 'clients', c)
    else
      local u = usage(c, window)
      local s = tonumber(head[2])
      if best == nil or u < best_u or (u == best_u and s < best_s) then
        best, best_id, best_u, best_s = c, head[1], u, s
      end
    end
  end
  if best == nil then
    redis.call('DEL', p .. 'wake')
    return {0}
  end
  local id = best_id
  redis.call('ZREM', p .. 'cq:' .. best, id)
  if redis.call('ZCARD', p .. 'cq:' .. best) == 0 then redis.call('SREM', p .. 'clients', best) end
  redis.call('ZREM', p .. 'queue', id)
  local job = p .. 'job:' .. id
  redis.call('HSET', job, 'state', 'claimed', 'node', node, 'url', url)
  redis.call('HSET', p .. 'running', id, node)
  running(best, id)
  wake_taken()
  local upload = redis.call('GET', p .. 'upload:' .. id) or ''
  return {1, id, upload, redis.call('HGET', job, 'record'), best}
end
-- Returns 1 if it finished the job (else 0), and the job's client if it read it.
local function finish(id, node, record, retention, window)
  local job = p .. 'job:' .. id
  local state = redis.call('HGET', job, 'state')
  if state ~= 'claimed' and state ~= 'running' and state ~= 'queued' then return 0 end
  local c = redis.call('HGET', job, 'client')
  if state == 'queued' then
    redis.call('ZREM', p .. 'queue', id)
    redis.call('ZREM', p .. 'cq:' .. c, id)
    if redis.call('ZCARD', p .. 'cq:' .. c) == 0 then redis.call('SREM', p .. 'clients', c) end
    wake_taken()
  else
    if node ~= '' and redis.call('HGET', p .. 'running', id) ~= node then return 0, c end
    redis.call('HDEL', p .. 'running', id)
    local start = ran(c, id)
    if start then
      local length, use = now_ms - tonumber(start), p .. 'use:' .. c
      redis.call('HSETNX', use, 'oldest', now_ms)  -- the first ended job held (else an older one)
      redis.call('ZADD', p .. 'held:' .. c, now_ms, id .. ':' .. length)
      redis.call('HINCRBY', use, 'held', length)
      idle_expiry(c, window)
    end
  end
  redis.call('HSET', job, 'state', 'finished', 'record', record)
  if state ~= 'running' then  -- the upload of a job that never started (`start` deletes it)
    redis.call('DECRBY', p .. 'queued_bytes', redis.call('STRLEN', p .. 'upload:' .. id))
    redis.call('DEL', p .. 'upload:' .. id)
  end
  redis.call('EXPIRE', job, retention)
  redis.call('EXPIRE', p .. 'log:' .. id, retention)
  local active = tonumber(redis.call('HINCRBY', p .. 'rl:' .. c, 'active', -1))
  if active < 0 then redis.call('HSET', p .. 'rl:' .. c, 'active', 0) end
  redis.call('PUBLISH', p .. 'done', id)
  return 1, c
end
"""

# ARGV: prefix, id, client, max_queue, record, hash, upload, ip, window, max_queued_bytes,
# node, url ('': claim nothing; else the node, which has a free slot, claims the cluster's next
# job in the same call, as `claim` does: its upload left out if that is this job, which the
# node has just unpacked). Returns {-1} or {-2} beyond the bounds; else {jobs ahead of this
# one, what `claim` returns (if asked)}.
_ENQUEUE = """
if redis.call('ZCARD', p .. 'queue') >= tonumber(ARGV[4]) then return {-1} end
local bytes = tonumber(redis.call('GET', p .. 'queued_bytes') or '0')
if bytes + string.len(ARGV[7]) > tonumber(ARGV[10]) then return {-2} end
redis.call('INCRBY', p .. 'queued_bytes', string.len(ARGV[7]))
local id, c = ARGV[2], ARGV[3]
local seq = redis.call('INCR', p .. 'seq')
redis.call('ZADD', p .. 'queue', seq, id)
redis.call('ZADD', p .. 'cq:' .. c, seq, id)
redis.call('SADD', p .. 'clients', c)
redis.call('HSET', p .. 'job:' .. id, 'client', c, 'seq', seq, 'state', 'queued',
  'record', ARGV[5], 'hash', ARGV[6], 'ip', ARGV[8])
redis.call('SET', p .. 'upload:' .. id, ARGV[7])
wake_queued()
local ahead = position(id, tonumber(ARGV[9]), seq, c)
if ARGV[12] == '' then return {ahead} end
local found = claim(ARGV[11], ARGV[12], tonumber(ARGV[9]))
if found[2] == id then found[3] = '' end
table.insert(found, 1, ahead)
return found
"""

# ARGV: prefix, node, url, window
_CLAIM = """
return claim(ARGV[2], ARGV[3], tonumber(ARGV[4]))
"""

# ARGV: prefix, id, node, record
_START = """
local id, node = ARGV[2], ARGV[3]
if redis.call('HGET', p .. 'running', id) ~= node then return 0 end
local job = p .. 'job:' .. id
if redis.call('HGET', job, 'state') ~= 'claimed' then return 0 end
redis.call('HSET', job, 'state', 'running', 'record', ARGV[4])
local size = redis.call('STRLEN', p .. 'upload:' .. id)
redis.call('DECRBY', p .. 'queued_bytes', size)
redis.call('DEL', p .. 'upload:' .. id)
return 1
"""

# ARGV: prefix, id, node ('' for any), record, retention, window, cpu seconds, cpu window,
# url ('' : claim nothing; else the node claims its next job in the same call, at its url), then
# the entries that end the job's log (what its node had not copied yet, and the end entry)
_FINISH = """
local id, node, window = ARGV[2], ARGV[3], tonumber(ARGV[6])
local done, c = finish(id, node, ARGV[4], tonumber(ARGV[5]), window)
if done == 1 and #ARGV >= 10 then
  local log = p .. 'log:' .. id
  redis.call('RPUSH', log, unpack(ARGV, 10))
  redis.call('EXPIRE', log, tonumber(ARGV[5]))
end
local cpu = tonumber(ARGV[7])
c = c or redis.call('HGET', p .. 'job:' .. id, 'client')
if cpu > 0 and c then  -- the job's CPU counts for its client's limit (limits.py)
  charge_cpu(p, c, id .. ':' .. ARGV[7], cpu, tonumber(ARGV[8]), now)
end
if ARGV[9] == '' then return {done} end
local found = claim(node, ARGV[9], window)
table.insert(found, 1, done)
return found
"""

# ARGV: prefix, id, node, window: a claimed job whose node is gone, never started, goes back to the
# front of its client's queue.
_REQUEUE = """
local id, node = ARGV[2], ARGV[3]
local job = p .. 'job:' .. id
if redis.call('HGET', job, 'state') ~= 'claimed' then return 0 end
if redis.call('HGET', p .. 'running', id) ~= node then return 0 end
local c = redis.call('HGET', job, 'client')
redis.call('HDEL', p .. 'running', id)
ran(c, id)
idle_expiry(c, tonumber(ARGV[4]))
redis.call('HSET', job, 'state', 'queued', 'node', '', 'url', '')
local seq = tonumber(redis.call('HGET', job, 'seq'))
redis.call('ZADD', p .. 'queue', seq, id)
-- by arrival: back at the front of its client's queue (every job of the client still queued
-- came after it, since a client's jobs are claimed in order)
redis.call('ZADD', p .. 'cq:' .. c, seq, id)
redis.call('SADD', p .. 'clients', c)
wake_queued()
return 1
"""

# ARGV: prefix, id, window
_POSITION = """
return position(ARGV[2], tonumber(ARGV[3]))
"""


@dataclass(frozen=True)
class Claimed:
    job_id: str
    upload: bytes
    record: bytes  # the queued record as the front end wrote it (JSON)
    client: str


class QueueFull(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # `jobs` (max_queue) or `bytes` (uploads held)


class NotAllowed(Exception):
    """The node's key is not on the cluster's allowlist: it may claim nothing."""


def _claimed(found: list[Any]) -> Claimed | None:
    """A claim script's answer: {1, id, upload, record, client}, {0} (nothing queued) or {-1}."""
    if int(found[0]) == -1:
        raise NotAllowed()
    if int(found[0]) != 1:
        return None
    return Claimed(text(found[1]), bytes(found[2]), bytes(found[3]), text(found[4]))


class ClusterQueue:
    def __init__(
        self,
        store: Store,
        window: float = 600.0,
        retention: float = 600.0,
        cpu_window: float = 3600.0,
    ) -> None:
        self.store = store
        self.window = window
        self.retention = retention
        self.cpu_window = cpu_window  # the CPU limit's window: how long a job's CPU is kept
        script = store.script
        self._enqueue = script(_PRELUDE + _ENQUEUE)
        self._claim = script(_PRELUDE + _CLAIM)
        self._start = script(_PRELUDE + _START)
        self._finish = script(_PRELUDE + CPU_LEDGER + _FINISH)
        self._requeue = script(_PRELUDE + _REQUEUE)
        self._position = script(_PRELUDE + _POSITION)

    async def _run(self, script: Script, *args: Arg) -> Any:
        return await self.store.call(script(*args))

    async def enqueue(
        self,
        job_id: str,
        client: str,
        record: bytes,
        job_hash: str,
        upload: bytes,
        ip: str,
        max_queue: int,
        max_bytes: int,
    ) -> int:
        """Queue a job; its position (1 for the next to start). QueueFull beyond the bounds."""
        args = (job_id, client, record, job_hash, upload, ip, max_queue, max_bytes)
        return (await self.enqueue_and_claim(*args, node="", url=""))[0]

    async def enqueue_and_claim(
        self,
        job_id: str,
        client: str,
        record: bytes,
        job_hash: str,
        upload: bytes,
        ip: str,
        max_queue: int,
        max_bytes: int,
        node: str,
        url: str,
    ) -> tuple[int, Claimed | None]:
        """`enqueue`, then `claim` for `node` (which has a free slot) in the same call to the
        store; url '' claims nothing. The job claimed may be another, due before this one; if
        it is this one, its upload is b'' (the node holds it already)."""
        args = (job_id, client, max_queue, record, job_hash, upload, ip, self.window, max_bytes)
        found = await self._run(self._enqueue, *args, node, url)
        ahead = int(found[0])
        if ahead < 0:
            raise QueueFull("jobs" if ahead == -1 else "bytes")
        if len(found) == 1:
            return ahead + 1, None
        with contextlib.suppress(NotAllowed):  # the node's claimer finds out, and waits
            return ahead + 1, _claimed(found[1:])
        return ahead + 1, None

    async def claim(self, node: str, url: str) -> Claimed | None:
        """The next job by the cluster's order, now this node's; None if nothing is queued;
        NotAllowed if this node's key is not on the allowlist."""
        return _claimed(await self._run(self._claim, node, url, self.window))

    async def wait_for_work(self, seconds: float) -> bool:
        """True when a job may be waiting (this node took the wake token: one idle node at a
        time does), False after `seconds` without one."""
        client: Any = self.store.client
        wake = client.blpop([self.store.key("wake")], timeout=seconds)
        found = await self.store.call(wake, blocks=seconds)
        return found is not None

    async def start(self, job_id: str, node: str, record: bytes) -> bool:
        return bool(await self._run(self._start, job_id, node, record))

    async def finish(self, job_id: str, node: str, record: bytes, cpu: float = 0.0) -> bool:
        """The final record (once: False if the job had finished, or is not `node`'s; `node`
        '' finishes a queued job, as a cancel does), and the job's CPU seconds, counted for its
        client's limit."""
        found = await self._run(self._finish, *self._finish_args(job_id, node, record, cpu), "")
        return bool(int(found[0]))

    async def finish_and_claim(
        self,
        job_id: str,
        node: str,
        record: bytes,
        cpu: float,
        url: str,
        log: Sequence[bytes] = (),
    ) -> tuple[bool, Claimed | None]:
        """`finish`, then `claim` for the slot the job leaves, in one call to the store; `log`:
        entries that end the job's log (`LogStreams.tail`), written if the record is taken."""
        args = self._finish_args(job_id, node, record, cpu)
        found = await self._run(self._finish, *args, url, *log)
        if not url:
            return bool(int(found[0])), None
        with contextlib.suppress(NotAllowed):  # the node's claimer finds out, and waits
            return bool(int(found[0])), _claimed(found[1:])
        return bool(int(found[0])), None

    def _finish_args(self, job_id: str, node: str, record: bytes, cpu: float) -> tuple[Arg, ...]:
        retention = int(self.retention)
        seconds = f"{cpu:.6f}"
        return (job_id, node, record, retention, self.window, seconds, self.cpu_window)

    async def requeue(self, job_id: str, node: str) -> bool:
        return bool(await self._run(self._requeue, job_id, node, self.window))

    async def position(self, job_id: str) -> int | None:
        found = int(await self._run(self._position, job_id, self.window))
        return None if found < 0 else found + 1

    async def length(self) -> int:
        return int(await self.store.call(self.store.client.zcard(self.store.key("queue"))))

    async def counts(self) -> tuple[int, int]:
        """Jobs queued, and jobs claimed or running, in the cluster (one round trip)."""
        async with self.store.client.pipeline(transaction=False) as pipe:
            pipe.zcard(self.store.key("queue"))
            pipe.hlen(self.store.key("running"))
            queued, running = await self.store.call(pipe.execute())
        return int(queued), int(running)

    async def job(self, job_id: str) -> dict[str, bytes]:
        """The job's hash (empty if unknown or expired)."""
        client: Any = self.store.client
        found: dict[bytes, bytes] = await self.store.call(
            client.hgetall(self.store.key("job", job_id))
        )
        return {text(k): v for k, v in found.items()}

    async def running(self) -> dict[str, str]:
        found = await self.store.call(self.store.client.hgetall(self.store.key("running")))
        return {text(k): text(v) for k, v in found.items()}
