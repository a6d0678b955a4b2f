"""Job logs in the store: the running node appends its log to a capped stream (`log:{id}`, field
`d` per chunk, a last entry with field `end` holding the final state), so that any node serves the
log, plain or live, while the job runs and after. The node's own `jobs.Log` stays the source; a
pump copies what it gains, at most every `BATCH` seconds, and retries while the store is away.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from jobrunner import errors
from jobrunner.cluster.store import Store, text
from jobrunner.jobs import Log

CHUNK = 64 * 1024
BATCH = 0.05  # seconds between two appends of a live log: bounds the entries of a stream
# Entries kept at most (a log is capped by --log-cap-mb anyway; this bounds the entries' count).
MAX_ENTRIES = 20_000


class LogStreams:
    def __init__(self, store: Store) -> None:
        self.store = store

    def key(self, job_id: str) -> str:
        return self.store.key("log", job_id)

    async def pump(self, job_id: str, log: Log, state: "asyncio.Future[str]") -> None:
        """Copy `log` into the stream as it grows; once it is closed, write the end entry with
        the state `state` resolves to. Returns when everything is in the store."""
        offset = 0
        while True:
            await log.wait_beyond(offset)
            if not log.closed:
                await asyncio.sleep(BATCH)
            while offset < len(log.data):
                chunk = bytes(log.data[offset : offset + CHUNK])
                await self._append(job_id, {b"d": chunk})
                offset += len(chunk)
            if log.closed and offset >= len(log.data):
                await self._append(job_id, {b"end": (await state).encode()})
                return

    async def _append(self, job_id: str, fields: dict[Any, Any]) -> None:
        client: Any = self.store.client
        while True:
            with contextlib.suppress(errors.ClusterUnavailable):
                await self.store.call(
                    client.xadd(self.key(job_id), fields, maxlen=MAX_ENTRIES, approximate=True)
                )
                return
            await asyncio.sleep(0.5)

    async def end(self, job_id: str, state: str) -> None:
        """The end entry of a job whose node could not write it (lost, or cancelled queued)."""
        await self.store.call(self.store.client.xadd(self.key(job_id), {b"end": state.encode()}))

    async def read(self, job_id: str) -> AsyncIterator[bytes]:
        """The log as it is now, chunk by chunk."""
        last = "-"
        client: Any = self.store.client
        while True:
            entries: Any = await self.store.call(
                client.xrange(self.key(job_id), min=last, count=64)
            )
            if last != "-":
                entries = entries[1:]
            if not entries:
                return
            for entry_id, fields in entries:
                last = text(entry_id)
                if b"d" in fields:
                    yield fields[b"d"]

    async def follow(self, job_id: str, block: float = 0.3) -> AsyncIterator[bytes | str]:
        """Chunks (bytes) as they come; the final state (str) last. Waits `block` seconds at a
        time, yielding b"" each time nothing came so the caller can look at the job meanwhile."""
        last = "0-0"
        client: Any = self.store.client
        while True:
            found: Any = await self.store.call(
                client.xread({self.key(job_id): last}, count=64, block=int(block * 1000))
            )
            if not found:
                yield b""
                continue
            for entry_id, fields in found[0][1]:
                last = text(entry_id)
                if b"end" in fields:
                    yield text(fields[b"end"])
                    return
                yield fields[b"d"]
