"""Awaiting what a job's run is made of: its process (reaped through a pidfd), its output pipe,
and the threads whose work must exist before the cleanup that undoes it (awaited to their end
even when the waiting task is cancelled)."""

import asyncio
import functools
import os
import resource
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def reaped(pid: int) -> tuple[int, resource.struct_rusage]:
    """Wait for our child `pid` to end, reap it: its wait status and resource usage. The event
    loop watches a pidfd of it, which wakes it the moment the child ends, instead of a thread
    blocked in wait4 handing the result over (as it still does before Linux 5.3, which has no
    pidfds): one trip less between a thread and the loop for every job."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        _pid, status, usage = await asyncio.to_thread(os.wait4, pid, 0)
        return status, usage
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:  # (until it is no longer watched: once is enough)
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    _pid, status, usage = os.wait4(pid, 0)  # it has ended: this returns at once
    return status, usage


async def to_the_end(task: "asyncio.Future[T]") -> bool:
    """Wait until `task` is done, even if this task is cancelled meanwhile: whether it was."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


async def in_thread_to_the_end(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`function` in a thread, awaited to its end even if this task is cancelled meanwhile (the
    cancellation is raised after it): a thread cannot be stopped, and what it makes (a mount,
    cgroups) must exist before the cleanup that follows can undo it."""
    # Handed to the executor at once (`to_thread` would first need a task and a turn of the loop).
    future = asyncio.get_running_loop().run_in_executor(
        None, functools.partial(function, *args, **kwargs)
    )
    if await to_the_end(future):
        if not future.cancelled():
            future.exception()  # its failure does not matter now: the cleanup follows anyway
        raise asyncio.CancelledError
    return future.result()


async def pump(fd: int, on_output: Callable[[bytes], None]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        while chunk := await reader.read(64 * 1024):
            on_output(chunk)
    finally:
        transport.close()
