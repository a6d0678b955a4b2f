"""`jobrunner cluster allow|deny|list|status`: the operator's view of the cluster's store."""

import asyncio
import base64
from collections.abc import Awaitable, Callable
from typing import TypeVar

from jobrunner.cluster.queue import ClusterQueue
from jobrunner.cluster.registry import Registry
from jobrunner.cluster.store import Store, opened

T = TypeVar("T")


def run(url: str, action: Callable[[Store], Awaitable[T]]) -> T:
    async def main() -> T:
        async with opened(url) as store:
            return await action(store)

    return asyncio.run(main())


def valid_key(key: str) -> bool:
    """A base64 Ed25519 public key (what `GET /health` says as worker_id)."""
    try:
        return len(base64.b64decode(key, validate=True)) == 32
    except ValueError:
        return False


async def allow(store: Store, key: str) -> None:
    await Registry(store).allow(key)


async def deny(store: Store, key: str) -> None:
    await Registry(store).deny(key)


async def listing(store: Store) -> list[str]:
    return sorted(await Registry(store).allowed())


async def status(store: Store) -> list[str]:
    """Lines: each node (URL, key, slots, free, state), then the queue and the lost nodes."""
    registry = Registry(store)
    nodes = await registry.nodes()
    queue = ClusterQueue(store)
    lines = []
    for node in nodes:
        state = "lost" if not node.alive else "draining" if node.draining else "up"
        if not node.alive:
            state += f" (last seen {node.silent:.0f} s ago)"
        trust = "" if node.allowed else " NOT ALLOWED (takes no jobs)"
        slots = f"slots {node.slots}, free {node.free}"
        lines.append(f"{node.url}  {state:<8} {slots}  key {node.node_id}{trust}")
    lost = sum(1 for node in nodes if not node.alive)
    running = len(await queue.running())
    lines.append(
        f"nodes: {len(nodes) - lost} up, {lost} lost; queue length: {await queue.length()}; "
        f"running: {running}; free slots: {sum(n.free for n in nodes if n.alive)}"
    )
    return lines
