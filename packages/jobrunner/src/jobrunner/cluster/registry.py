"""The nodes of the cluster and the operator's allowlist of keys.

A node's heartbeat is a key that lives `lost_after` seconds, renewed twice a second; its facts
(URL, slots, free slots, draining) sit in the `nodes` hash. A node whose heartbeat has expired is
lost: any node that has itself reached the store without a break for `lost_after` seconds (so
that every live node has had the time to renew its heartbeat, after an outage of the store too)
reports the lost node's running jobs `failed: worker_lost` and puts its claimed, never started,
jobs back in the queue.
"""

import msgspec

from jobrunner.cluster.store import Store, text


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


class Registry:
    def __init__(self, store: Store, lost_after: float = 10.0) -> None:
        self.store = store
        self.lost_after = lost_after

    async def beat(self, facts: NodeFacts) -> None:
        client = self.store.client
        async with client.pipeline(transaction=True) as pipe:
            pipe.set(self.store.key("alive", facts.node_id), b"1", px=int(self.lost_after * 1000))
            pipe.hset(self.store.key("nodes"), facts.node_id, msgspec.json.encode(facts))
            await self.store.call(pipe.execute(), probe=True)

    async def leave(self, node_id: str) -> None:
        async with self.store.client.pipeline(transaction=True) as pipe:
            pipe.delete(self.store.key("alive", node_id))
            pipe.hdel(self.store.key("nodes"), node_id)
            await self.store.call(pipe.execute())

    async def alive(self, node_id: str) -> bool:
        return bool(
            await self.store.call(self.store.client.exists(self.store.key("alive", node_id)))
        )

    async def nodes(self) -> list[NodeView]:
        found = await self.store.call(self.store.client.hgetall(self.store.key("nodes")))
        allowed = await self.allowed()
        views = []
        for raw in found.values():
            facts = msgspec.json.decode(raw, type=NodeFacts)
            views.append(
                NodeView(
                    facts.node_id,
                    facts.url,
                    facts.slots,
                    facts.free,
                    facts.draining,
                    facts.node_id in allowed,
                    await self.alive(facts.node_id),
                )
            )
        return sorted(views, key=lambda view: view.url)

    async def forget(self, node_id: str) -> None:
        """A lost node whose jobs have all been settled leaves the `nodes` hash."""
        await self.store.call(self.store.client.hdel(self.store.key("nodes"), node_id))

    # --- the allowlist ---------------------------------------------------------------------------

    async def allow(self, key: str) -> None:
        await self.store.call(self.store.client.sadd(self.store.key("allowed"), key))

    async def deny(self, key: str) -> None:
        await self.store.call(self.store.client.srem(self.store.key("allowed"), key))

    async def allowed(self) -> set[str]:
        found = await self.store.call(self.store.client.smembers(self.store.key("allowed")))
        return {text(member) for member in found}
