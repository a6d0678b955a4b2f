"""Job logs in the store: the running node appends its log to a list (`log:{id}`), one entry per
chunk (`d` + bytes), then a last entry `e` + the final state, so that any node serves the log,
plain or live, while the job runs and after. The node's own `jobs.Log` stays the source; once the
job's start is in the store, a pump copies what it gains, at most every `BATCH` seconds, and
retries while the store is away. What is left when the job ends, and the end entry, are written
by the script that finishes the job, with its record (`ClusterQueue.finish_and_claim`).

A list, not a Redis stream: a stream costs about 4.7 KB even for a two-line log (its listpack
node is preallocated), a list of a few chunks about 100 bytes, and 10,000 finished jobs must fit
in a few tens of MB. Live readers ask for what is new every `POLL` seconds.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from jobrunner import errors
from jobrunner.cluster.store import Store, text
from jobrunner.jobs import Log

CHUNK = 64 * 1024
BATCH = 0.05  # seconds between two appends of a live log: bounds the entries of a log
POLL = 0.1  # seconds between two looks of a live reader at a log that has nothing new
PAGE = 64  # entries read at once


class LogStreams:
    def __init__(self, store: Store) -> None:
        self.store = store

    def key(self, job_id: str) -> str:
        return self.store.key("log", job_id)

    async def pump(self, job_id: str, log: Log, started: asyncio.Event, copied: list[int]) -> None:
        """Copy `log` into the stream as it grows, once the job's start is in the store
        (`started`), until the log is closed; `copied[0]` says how much of it is in the store.
        The rest, and the end entry, go with the job's final record (`tail`, in one script):
        a job that ends before its start is written costs no log write of its own."""
        while True:
            await log.wait_beyond(copied[0])
            with contextlib.suppress(TimeoutError):  # gather BATCH seconds, unless it ends
                await asyncio.wait_for(log.wait_closed(), BATCH)
            if not log.closed and not started.is_set():
                await _first(started.wait(), log.wait_closed())
            if log.closed:
                return
            while copied[0] < len(log.data):
                chunk = bytes(log.data[copied[0] : copied[0] + CHUNK])
                await self._append(job_id, b"d" + chunk)
                copied[0] += len(chunk)

    @staticmethod
    def tail(log: Log, copied: int, state: str) -> list[bytes]:
        """The entries of what `pump` did not copy, then the end entry with the job's state."""
        rest = range(copied, len(log.data), CHUNK)
        return [b"d" + bytes(log.data[at : at + CHUNK]) for at in rest] + [b"e" + state.encode()]

    async def _append(self, job_id: str, entry: bytes) -> None:
        client: Any = self.store.client
        while True:
            with contextlib.suppress(errors.ClusterUnavailable):
                await self.store.call(client.rpush(self.key(job_id), entry))
                return
            await asyncio.sleep(0.5)

    async def end(self, job_id: str, state: str) -> None:
        """The end entry of a job whose node could not write it (lost, or cancelled queued)."""
        client: Any = self.store.client
        await self.store.call(client.rpush(self.key(job_id), b"e" + state.encode()))

    async def _page(self, job_id: str, start: int) -> list[bytes]:
        client: Any = self.store.client
        found: list[bytes] = await self.store.call(
            client.lrange(self.key(job_id), start, start + PAGE - 1)
        )
        return found

    async def read(self, job_id: str) -> AsyncIterator[bytes]:
        """The log as it is now, chunk by chunk."""
        start = 0
        while entries := await self._page(job_id, start):
            start += len(entries)
            for entry in entries:
                if entry[:1] == b"d":
                    yield entry[1:]

    async def follow(self, job_id: str) -> AsyncIterator[bytes | str]:
        """Chunks (bytes) as they come; the final state (str) last. Yields b"" each time nothing
        came for POLL seconds, so that the caller can look at the job meanwhile."""
        start = 0
        while True:
            entries = await self._page(job_id, start)
            if not entries:
                yield b""
                await asyncio.sleep(POLL)
                continue
            start += len(entries)
            for entry in entries:
                if entry[:1] == b"e":
                    yield text(entry[1:])
                    return
                yield entry[1:]


async def _first(*waits: "Coroutine[Any, Any, object]") -> None:
    """Return when the first of `waits` returns; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
