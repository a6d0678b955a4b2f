"""`until_gone`: work in the caller's own task, cancelled when the client's `receive` says it left.

The client here is an ASGI `receive` fed from a queue (what a server hands an app); the real
servers' long polls and log followers are tested end to end in tests/jobrunner."""

import asyncio

import pytest

from servekit import until_gone


class Client:
    def __init__(self) -> None:
        self.messages: asyncio.Queue[dict[str, str]] = asyncio.Queue()

    async def receive(self) -> dict[str, str]:
        return await self.messages.get()


def test_the_work_s_result_and_the_watcher_gone_with_it():
    async def main() -> None:
        client = Client()
        before = asyncio.all_tasks()

        async def work() -> str:
            return "done"

        assert await until_gone(client.receive, "http.disconnect", work()) == "done"
        watchers = asyncio.all_tasks() - before  # cancelled, ending in a later turn
        assert len(watchers) == 1
        await asyncio.gather(*watchers, return_exceptions=True)
        assert all(watcher.cancelled() for watcher in watchers)

    asyncio.run(main())


def test_a_client_that_leaves_cancels_the_work_and_gets_none():
    async def main() -> None:
        client = Client()
        cancelled = asyncio.Event()

        async def forever() -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return "never"

        async def leave() -> None:
            await client.messages.put({"type": "http.request"})  # read and dropped
            await client.messages.put({"type": "http.disconnect"})

        asyncio.get_running_loop().call_soon(asyncio.ensure_future, leave())
        assert await until_gone(client.receive, "http.disconnect", forever()) is None
        assert cancelled.is_set()
        assert asyncio.current_task().cancelling() == 0  # nothing left to cancel the caller

    asyncio.run(main())


def test_a_cancel_from_elsewhere_is_not_taken_for_the_client_leaving():
    async def main() -> None:
        client = Client()
        started = asyncio.Event()

        async def work() -> None:
            started.set()
            await asyncio.Event().wait()

        waiting = asyncio.ensure_future(until_gone(client.receive, "http.disconnect", work()))
        await started.wait()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())


def test_what_reading_from_the_client_raised_is_raised():
    async def main() -> None:
        async def broken() -> dict[str, str]:
            raise RuntimeError("receive failed")

        with pytest.raises(RuntimeError, match="receive failed"):
            await until_gone(broken, "http.disconnect", asyncio.Event().wait())

    asyncio.run(main())
