"""Streamed bodies and WebSockets that stop the moment their client is gone.

Starlette's `StreamingResponse` stops a body on `http.disconnect` by cancelling the task that
sends it (on servers of ASGI spec < 2.4; hypercorn says 2.1). A cancellation lands only where
that task waits, and hypercorn's `send` to a connection that is gone never waits: it drops the
bytes and returns (asyncio logs "socket.send() raised exception." for every write past the
fifth, and each write re-raises one stored ConnectionResetError, whose traceback grows with every
raise and keeps the frames, and so the chunks, it passed through). A body that is already in
memory (a job's log) then runs to its end in one step of the event loop, whatever the client did:
200 clients that closed a 12 MiB log cost a server 1.1 GB and 80,000 log lines.

`ClientStream` checks for the disconnect before every chunk, yields to the event loop after each
one (so that the disconnect is seen), and closes its iterator when the client leaves.
`until_gone` runs work (a long poll's wait) until it ends or its client leaves, and
`while_connected` does the same for a WebSocket handler that only sends: Starlette learns that a
WebSocket client left only from `receive`, which such a handler never calls.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from starlette.requests import ClientDisconnect
from starlette.responses import FileResponse, StreamingResponse
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

T = TypeVar("T")


async def first_of(*work: Awaitable[object]) -> None:
    """Run `work` side by side until one of them ends, cancel the others, and raise what the
    first to end raised."""
    tasks = [asyncio.ensure_future(item) for item in work]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            _forget_cancellation(task)
    for task in done:
        task.result()


def _forget_cancellation(task: asyncio.Future[Any]) -> None:
    """A cancelled task keeps the CancelledError it ended with until it is asked for it, and
    that exception's traceback holds the frames it passed through, some of which may hold the
    task (anyio's thread limiter keeps its borrower, the current task): a cycle that only the
    cyclic collector could free. Asking for it takes it out of the task."""
    if task.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            task.result()


class ClientStream(StreamingResponse):
    """A streamed body that is read only while its client is there, and `on_close` run once
    however the response ends (a per-client slot given back, say).

    Memory per client is one chunk plus what the server's transport buffers: each chunk is sent
    only when the connection took the previous one."""

    def __init__(
        self,
        content: AsyncIterable[bytes],
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(content, status_code, headers, media_type)
        self.content = content
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        async def pump() -> None:
            start = {"type": "http.response.start", "status": self.status_code}
            await send({**start, "headers": self.raw_headers})
            async for chunk in self.content:
                if gone.is_set():
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await asyncio.sleep(0)  # a send to a closed connection never waits: let watch run
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        try:
            with contextlib.suppress(OSError):  # ASGI 2.4 servers raise on a send after the end
                await first_of(pump(), watch())
        finally:
            aclose = getattr(self.content, "aclose", None)  # an async generator's `finally` runs
            if aclose is not None:
                await aclose()
            if self.on_close is not None:
                self.on_close()


class ClientFile(FileResponse):
    """A file response with `on_close` run once however it ends (a per-client slot given back,
    say), the client reading it to the end, leaving, or being dropped.

    Starlette (for servers of ASGI spec < 2.4) sends the file in a task of an anyio task group
    and cancels it when the client leaves; anyio keeps the cancellation's exception in a frame
    its traceback holds: about 120 objects that only the cyclic collector could free for every
    download whose client left. So the client is watched here, as `ClientStream` does, and
    Starlette is told the spec is 2.4, under which it sends the file in this task alone."""

    def __init__(
        self, *args: Any, on_close: Callable[[], None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asgi = {**scope.get("asgi", {}), "spec_version": "2.4"}

        async def respond() -> None:
            await super(ClientFile, self).__call__({**scope, "asgi": asgi}, receive, send)

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        try:
            # ASGI 2.4 servers raise on a send after the end; Starlette says ClientDisconnect.
            with contextlib.suppress(OSError, ClientDisconnect):
                await first_of(respond(), watch())
        finally:
            if self.on_close is not None:
                self.on_close()


async def until_gone(
    receive: Callable[[], Awaitable[Mapping[str, Any]]], disconnect: str, work: Awaitable[T]
) -> T | None:
    """`work`'s result, or None once the client has gone (`receive` gave a `disconnect`
    message; `work` is then cancelled). Whatever the client sends meanwhile is read and dropped.

    `work` runs in the caller's own task, which a watcher task cancels if the client leaves:
    when `work` ends, the caller goes on in the same turn of the event loop. (Raced in two tasks,
    as `first_of` races work, an answer waited four more turns while both tasks ended.)"""
    caller = asyncio.current_task()
    assert caller is not None
    gone = False
    failure: list[Exception] = []  # what reading from the client raised, if it did

    async def client_left() -> None:
        nonlocal gone
        try:
            while (await receive())["type"] != disconnect:
                pass
        except Exception as error:
            failure.append(error)
        gone = True
        caller.cancel()

    watcher = asyncio.ensure_future(client_left())
    try:
        return await work
    except asyncio.CancelledError:
        if gone and caller.uncancel() == 0:  # the watcher's cancel, and only that
            if failure:
                raise failure[0] from None
            return None
        raise
    finally:
        # Not awaited (the caller would wait a turn for it): it ends on its own in a later turn,
        # and its cancellation is taken out of it then.
        watcher.cancel()
        watcher.add_done_callback(_forget_cancellation)


async def while_connected(websocket: WebSocket, work: Awaitable[None]) -> None:
    """Run `work`, which sends on an accepted `websocket`, until it ends or the client leaves
    (then it is cancelled). Whatever the client sends meanwhile is read and dropped."""
    await until_gone(websocket.receive, "websocket.disconnect", work)
