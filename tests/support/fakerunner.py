"""The real jobrunner app on a real loopback server, in this process, with a FAKE runner.

`FakeRunner` obeys the runner interface (`jobrunner.node.state.Runner`) without nsjail: the job's
entrypoint is a JSON list of steps (what to print, which files to leave, how to exit, when to wait),
and its outputs go through the real output collection. So the HTTP contract is tested in seconds,
without root; the real-sandbox tests stay where they are.

Steps: {"out": text} / {"out_hex": hex bytes}; {"file": name, "data": text} / {"file_hex":
hex name, "data": text}; {"deep": n} (a file n directories of 200 characters down); {"wait": gate}
(an asyncio gate the test opens); {"block": gate} (a thread blocks until the test opens it, like
the sandbox waiting for nsjail); {"raise": text}; {"exit": n}; {"stdin": true} (the job's stdin
written to its log). A cancel (`stop`) ends a "wait" at once: the job is then `cancelled`.
"""

import asyncio
import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from jobrunner.config import Settings
from jobrunner.environments import MARKER
from jobrunner.node.app import build_app
from jobrunner.node.service import JobService
from jobrunner.sandbox.runs import RunResult, RunSpec, collect_outputs
from jobrunner.signing import WorkerKey
from servekit import Listener, TrustedProxies
from servekit.launcher import serve_async

GENEROUS = {"rate_concurrent": 1000, "rate_per_hour": 100000, "rate_cpu_seconds": 100000.0}


class FakeRunner:
    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.blocks: dict[str, threading.Event] = {}
        self.started: list[str] = []  # job ids, in the order they started
        # Where queued uploads wait, as the sandbox's staging tmpfs (None: in the job dirs).
        self.staging: Path | None = None

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def block(self, name: str) -> threading.Event:
        return self.blocks.setdefault(name, threading.Event())

    def open(self, name: str) -> None:
        self.gate(name).set()
        self.block(name).set()

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
        self.started.append(spec.job_id)
        work = spec.job_dir / "work"
        await asyncio.to_thread(shutil.copytree, spec.inputs_dir, work)
        stdin = spec.stdin.read_bytes() if spec.stdin else b""
        if spec.staged is not None:  # as the sandbox does once the work dir holds the inputs
            await asyncio.to_thread(shutil.rmtree, spec.staged)
        (spec.job_dir / "outputs").mkdir(mode=0o700)
        steps = json.loads((work / spec.argv[1]).read_text())
        code = 0
        for step in steps:
            if "out" in step:
                on_output(step["out"].encode())
            elif "out_hex" in step:
                on_output(bytes.fromhex(step["out_hex"]))
            elif "file" in step or "file_hex" in step:
                name = (
                    os.fsencode(step["file"]) if "file" in step else bytes.fromhex(step["file_hex"])
                )
                target = os.path.join(os.fsencode(work), name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as handle:
                    handle.write(step.get("data", "").encode())
            elif "deep" in step:  # a file further down than PATH_MAX reaches from the host
                _deep_file(work, step["deep"], step.get("data", "").encode())
            elif "wait" in step:
                gate = asyncio.ensure_future(self.gate(step["wait"]).wait())
                stopping = asyncio.ensure_future(stop.wait())
                await asyncio.wait({gate, stopping}, return_when=asyncio.FIRST_COMPLETED)
                gate.cancel()
                stopping.cancel()
                if stop.is_set():
                    return RunResult(None, "cancelled", 0.02, 2_000_000)
            elif "stdin" in step:
                on_output(stdin)
            elif "block" in step:
                await asyncio.to_thread(self.block(step["block"]).wait)
            elif "raise" in step:
                raise RuntimeError(step["raise"])
            elif "exit" in step:
                code = step["exit"]
        result = RunResult(code, None if code == 0 else "nonzero_exit", 0.01, 1_000_000)
        await collect_outputs(spec, work, result)
        return result


def _deep_file(work: Path, depth: int, data: bytes) -> None:
    """Directories of 200-character names `depth` deep, made relative to open directory fds
    (as a job inside the jail can), then a file `leaf.txt` at the bottom."""
    fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            name = f"{level:03d}" + "d" * 197
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, data)
        os.close(leaf)
    finally:
        os.close(fd)


class Clock:
    """The monotonic clock, moved on by the test when it says so (`advance`): jobs held for a
    minute of the service's time in a moment of the test's."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class Served:
    url: str
    service: JobService
    runner: FakeRunner
    stop: asyncio.Event
    metrics_url: str = ""  # GET /metrics, when served with `metrics=True`

    @property
    def ws(self) -> str:
        return self.url.replace("http://", "ws://", 1)


@contextlib.asynccontextmanager
async def serving(
    state: Path,
    runner: FakeRunner | None = None,
    clock: Callable[[], float] | None = None,
    metrics: bool = False,
    listener: Listener | None = None,
    wrap: Callable[[Any], Any] | None = None,
    **options: Any,
) -> AsyncIterator[Served]:
    """Serve the real app on 127.0.0.1 (a free port) in this event loop until the block ends
    (a cluster node's, allowed in the store, with the option `cluster=URL`; with the service's
    `clock` if given: a test's `Clock` it moves on); with `metrics`, its
    metrics app too, on a listener of its own; `listener` (its port 0) serves HTTPS with a
    certificate; `wrap` (if given) wraps the ASGI app, as a proxy or an older server would."""
    runner = runner or FakeRunner()
    settings = Settings(state_dir=str(state), **{"concurrency": 2, **GENEROUS, **options})
    default = state / "envs" / "default"
    default.mkdir(parents=True, exist_ok=True)
    (default / MARKER).write_text("")  # the fake runner needs no venv
    key = WorkerKey.load_or_create(state / "worker.key")
    node = None  # the cluster node, if it is one (told its URL once served)
    if settings.cluster:  # a cluster node, allowed in the cluster's store
        assert clock is None, "a cluster node runs on the real clock"
        from jobrunner.cluster.http import build_cluster_app
        from jobrunner.cluster.registry import Registry
        from jobrunner.cluster.service import ClusterService
        from jobrunner.cluster.store import Store, connect

        store = Store(connect(settings.cluster))
        try:
            await Registry(store).allow(key.worker_id)
        finally:
            await store.close()
        node = ClusterService(settings, runner, key, Store(connect(settings.cluster)))
        service = node
        app = build_cluster_app(node, TrustedProxies(settings.trusted_proxies))
    else:
        service = (
            JobService(settings, runner, key, clock) if clock else JobService(settings, runner, key)
        )
        app = build_app(service, TrustedProxies(settings.trusted_proxies))
    if wrap is not None:
        app = wrap(app)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    side_ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    side = {}
    if metrics:
        from jobrunner.node.metrics_app import build_metrics_app
        from servekit import SideApp

        metrics_app = build_metrics_app(service.metrics)
        listener = Listener("127.0.0.1", 0)
        side["side"] = [SideApp(metrics_app, listener, "metrics", side_ready.set_result)]
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_async(
            app,
            listener or Listener("127.0.0.1", 0),
            graceful_timeout=2,
            on_ready=ready.set_result,
            stop=stop,
            before_shutdown=getattr(service, "drain", None),  # (so it also runs on older code)
            **side,
        )
    )
    url = await asyncio.wait_for(ready, 10)
    if node is not None:
        node.advertise = url
    metrics_url = await asyncio.wait_for(side_ready, 10) if metrics else ""
    # The announcement comes before the app's startup (the state dir, the runner loops) has run;
    # hypercorn answers only once it has: a test that calls the service directly waits for that.
    # (An HTTPS listener's certificate is the test's own: this probe only waits for the app.)
    async with httpx.AsyncClient(verify=not url.startswith("https:")) as client:
        await client.get(f"{url}/health", timeout=10)
    try:
        yield Served(url, service, runner, stop, metrics_url)
    finally:
        for name in list(runner.gates):
            runner.open(name)
        for name in list(runner.blocks):
            runner.open(name)
        stop.set()
        await asyncio.wait_for(task, 30)


def steps(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))
