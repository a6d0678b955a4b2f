"""An upload the pool holds while it offers it to workers: the first MiB in memory, the rest in an
unlinked temporary file (as Starlette keeps a worker's upload parts), read back as often as a
refused dispatch makes the pool try the next worker.

Memory per upload is bounded whatever its size or pace: at most `memory` bytes, plus a write
buffer that goes to the file (off the event loop) whenever it holds 256 KiB, so a client that
trickles its body a byte at a time costs no thread hop per byte.
"""

import asyncio
import tempfile
from collections.abc import AsyncIterator
from typing import IO

MEMORY = 1 << 20
FLUSH = 256 * 1024
CHUNK = 1 << 16


class Spool:
    def __init__(self, memory: int = MEMORY) -> None:
        self.size = 0
        self._memory = memory
        self._buffer = bytearray()  # everything while it fits in `memory`, then what awaits a write
        self._file: IO[bytes] | None = None

    async def write(self, data: bytes) -> None:
        self.size += len(data)
        self._buffer += data
        if self._file is None and len(self._buffer) <= self._memory:
            return
        if self._file is None:
            self._file = await asyncio.to_thread(tempfile.TemporaryFile)
        if len(self._buffer) >= FLUSH:
            await self._flush()

    async def _flush(self) -> None:
        assert self._file is not None
        pending, self._buffer = bytes(self._buffer), bytearray()
        await asyncio.to_thread(self._file.write, pending)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The whole body from its start, in chunks of at most 64 KiB."""
        if self._file is None:
            for offset in range(0, len(self._buffer), CHUNK):
                yield bytes(self._buffer[offset : offset + CHUNK])
            return
        if self._buffer:
            await self._flush()
        file = self._file
        await asyncio.to_thread(file.seek, 0)
        while chunk := await asyncio.to_thread(file.read, CHUNK):
            yield chunk

    def close(self) -> None:
        self._buffer = bytearray()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "Spool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
