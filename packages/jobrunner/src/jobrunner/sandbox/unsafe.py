"""Running jobs WITHOUT isolation, for development on hosts where nsjail cannot run.

Only used with `jobrunner serve --unsafe-no-sandbox`, which warns on every start and in `GET /`.
The job runs as the server's user with a time limit and nothing else: never expose it.
"""

import asyncio
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jobrunner.sandbox.jail import BASE_ENV
from jobrunner.sandbox.runs import RunResult, RunSpec, collect_outputs
from jobrunner.wire import Failure


class UnsafeRunner:
    async def run(
        self,
        spec: RunSpec,
        on_output: Callable[[bytes], None],
        on_cpu: Callable[[float], None] = lambda _: None,
        stop: asyncio.Event | None = None,
        on_result: Callable[[RunResult], None] | None = None,  # not used: nothing follows
        linger: Callable[[], Awaitable[None]] | None = None,  # not used: nothing to tear down
    ) -> RunResult:
        stop = stop or asyncio.Event()
        if stop.is_set():
            return RunResult(None, "cancelled", 0.0, 0)
        work = spec.job_dir / "work"
        setting_up = time.monotonic()
        await asyncio.to_thread(shutil.copytree, spec.inputs_dir, work)
        (spec.job_dir / "outputs").mkdir(mode=0o700)
        argv = [_host_path(spec.argv[0], spec.environment), *spec.argv[1:]]
        env = {
            **BASE_ENV,
            "PATH": f"{spec.environment}/bin:/usr/bin:/bin",
            "HOME": str(work),
            **spec.env,
        }
        started = time.monotonic()
        setup_seconds = started - setting_up
        with open(spec.stdin or os.devnull, "rb") as stdin:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=work,
                env=env,
                stdin=stdin,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        stdout = process.stdout
        assert stdout is not None

        async def pump() -> None:
            while chunk := await stdout.read(65536):
                on_output(chunk)

        failure: Failure | None = None
        note: str | None = None
        running = asyncio.ensure_future(asyncio.gather(pump(), process.wait()))
        stopping = asyncio.ensure_future(stop.wait())
        either: set[asyncio.Future[Any]] = {running, stopping}
        try:
            await asyncio.wait(either, timeout=spec.timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not running.done():
            process.kill()
            await running
            failure, note = "timeout", f"time limit of {spec.timeout} s reached"
        if stop.is_set():
            failure, note = "cancelled", None
        code = process.returncode
        if failure is None and code != 0:
            failure = "nonzero_exit"
        result = RunResult(code, failure, round(time.monotonic() - started, 3), 0, note=note)
        result.setup_seconds = setup_seconds
        if failure != "cancelled":
            await collect_outputs(spec, work, result)
        await asyncio.to_thread(shutil.rmtree, work, True)
        return result


def _host_path(inside: str, environment: Path) -> str:
    return (
        str(environment / inside.removeprefix("/venv/")) if inside.startswith("/venv/") else inside
    )
