"""The pool's upload spool: bounded memory, the same bytes back as often as asked."""

import asyncio
import os

from jobrunner.pool.spool import Spool


async def written(spool: Spool, data: bytes, piece: int) -> None:
    for offset in range(0, len(data), piece):
        await spool.write(data[offset : offset + piece])


async def read_back(spool: Spool) -> bytes:
    return b"".join([chunk async for chunk in spool.chunks()])


def test_a_small_body_stays_in_memory_and_reads_back_twice():
    async def scenario() -> None:
        with Spool() as spool:
            data = os.urandom(300_000)
            await written(spool, data, 7000)
            assert spool._file is None and spool.size == len(data)
            assert await read_back(spool) == data
            assert await read_back(spool) == data  # a retry on the next worker

    asyncio.run(scenario())


def test_a_large_body_goes_to_a_file_and_memory_stays_bounded():
    async def scenario() -> None:
        with Spool(memory=1 << 20) as spool:
            data = os.urandom(5 << 20)
            await written(spool, data, 1000)  # a trickle: no write to the file per piece
            assert spool._file is not None
            assert len(spool._buffer) < 300_000  # at most a flush's worth waits in memory
            assert await read_back(spool) == data
            assert await read_back(spool) == data
            chunks = [len(chunk) async for chunk in spool.chunks()]
            assert max(chunks) <= 1 << 16
        assert spool._file is None  # closed (and the unlinked file gone with it)

    asyncio.run(scenario())
