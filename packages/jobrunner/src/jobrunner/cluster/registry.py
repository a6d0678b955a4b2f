"""The nodes of the cluster and the operator's allowlist of keys.

A node's heartbeat is a key that lives `lost_after` seconds, renewed twice a second; its facts
(URL, slots, free slots, draining) sit in the `nodes` hash. A node whose heartbeat has expired is
lost: any node that has itself reached the store without a break for `lost_after` seconds (so
that every live node has had the time to renew its heartbeat, after an outage of the store too)
reports the lost node's running jobs `failed: worker_lost` and puts its claimed, never started,
jobs back in the queue.

A lost node stays listed (`jobrunner cluster status`: lost, last seen N s ago) until it has been
silent for `forget_after` seconds (a node's `--retention`: by then every record of a job it ran
has expired, and nothing in the cluster refers to it), then any live node forgets it, unless a
job in the store is still marked as its. A node that comes back simply beats again.
"""

from typing import Any

import msgspec

from jobrunner.cluster.store import Store, text

# ARGV: prefix, node, facts (JSON), milliseconds the heartbeat lives
_BEAT = """
local p, node = ARGV[1], ARGV[2]
redis.call('SET', p .. 'alive:' .. node, '1', 'PX', ARGV[4])
redis.call('HSET', p .. 'nodes', node, ARGV[3])
redis.call('ZADD', p .. 'seen', redis.call('TIME')[1], node)
return 1
"""

# ARGV: prefix, seconds: the nodes silent for longer, with no job marked theirs, are forgotten
_FORGET = """
local p = ARGV[1]
local cutoff = tonumber(redis.call('TIME')[1]) - tonumber(ARGV[2])
local silent = redis.call('ZRANGEBYSCORE', p .. 'seen', '-inf', cutoff)
if #silent == 0 then return {} end
local busy = {}
for _, node in ipairs(redis.call('HVALS', p .. 'running')) do busy[node] = true end
local gone = {}
for _, node in ipairs(silent) do
  if redis.call('EXISTS', p .. 'alive:' .. node) == 0 and not busy[node] then
    redis.call('HDEL', p .. 'nodes', node)
    redis.call('ZREM', p .. 'seen', node)
    table.insert(gone, node)
  end
end
return gone
"""


class NodeFacts(msgspec.Struct, forbid_unknown_fields=True):
    node_id: str
    url: str
    slots: int
    free: int
    draining: bool = False
    allowed: bool = True


class NodeView(msgspec.Struct):
    """A node as `jobrunner cluster status` shows it."""

    node_id: str
    url: str
    slots: int
    free: int
    draining: bool
    allowed: bool
    alive: bool
    silent: float = 0.0  # seconds since its last heartbeat (the store's clock)


class Registry:
    def __init__(self, store: Store, lost_after: float = 10.0) -> None:
        self.store = store
        self.lost_after = lost_after
        self._beat = store.script(_BEAT)
        self._forget = store.script(_FORGET)

    async def beat(self, facts: NodeFacts) -> None:
        lives = int(self.lost_after * 1000)
        beat = self._beat(facts.node_id, msgspec.json.encode(facts), lives)
        await self.store.call(beat, probe=True)

    async def leave(self, node_id: str) -> None:
        # not MULTI: the ACL of the README grants no @transaction
        async with self.store.client.pipeline(transaction=False) as pipe:
            pipe.delete(self.store.key("alive", node_id))
            pipe.hdel(self.store.key("nodes"), node_id)
            pipe.zrem(self.store.key("seen"), node_id)
            await self.store.call(pipe.execute())

    async def forget_silent(self, seconds: float) -> list[str]:
        """Forget the lost nodes silent for more than `seconds` (see the module's text)."""
        gone = await self.store.call(self._forget(seconds))
        return [text(node) for node in gone]

    async def alive(self, node_id: str) -> bool:
        return bool(
            await self.store.call(self.store.client.exists(self.store.key("alive", node_id)))
        )

    async def nodes(self) -> list[NodeView]:
        found = await self.store.call(self.store.client.hgetall(self.store.key("nodes")))
        client: Any = self.store.client
        seen = dict(
            await self.store.call(client.zrange(self.store.key("seen"), 0, -1, withscores=True))
        )
        now = float(text((await self.store.call(client.time()))[0]))
        allowed = await self.allowed()
        views = []
        for key, raw in found.items():
            facts = msgspec.json.decode(raw, type=NodeFacts)
            silent = max(0.0, now - seen[key]) if key in seen else 0.0
            views.append(
                NodeView(
                    facts.node_id,
                    facts.url,
                    facts.slots,
                    facts.free,
                    facts.draining,
                    facts.node_id in allowed,
                    await self.alive(facts.node_id),
                    silent,
                )
            )
        return sorted(views, key=lambda view: view.url)

    # --- the allowlist ---------------------------------------------------------------------------

    async def allow(self, key: str) -> None:
        await self.store.call(self.store.client.sadd(self.store.key("allowed"), key))

    async def deny(self, key: str) -> None:
        await self.store.call(self.store.client.srem(self.store.key("allowed"), key))

    async def allowed(self) -> set[str]:
        found = await self.store.call(self.store.client.smembers(self.store.key("allowed")))
        return {text(member) for member in found}
