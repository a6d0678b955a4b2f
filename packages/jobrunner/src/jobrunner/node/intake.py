"""The submit path: admitting a client, unpacking and checking its upload, queueing the job.

Separate from the running and the reads because it is the one part that takes a client's bytes:
it validates the manifest, unpacks the tarballs in a thread (a little upload on the loop's thread,
see `Intake._unpacked_here`) under the upload's budget and deadline, and only then enqueues;
everything it refuses is a domain error (`jobrunner.errors`).
The cluster node uses `_accept` for its own submits and claims.
"""

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from jobrunner import errors, manifest, signing, uploads
from jobrunner.environments import TEMPLATES
from jobrunner.jobs import Job, Log, new_job_id
from jobrunner.node.state import JobState
from jobrunner.ratelimit import Reservation
from jobrunner.wire import SubmitResult

log = logging.getLogger("jobrunner")
T = TypeVar("T")
# The manifest's stdin, kept beside the inputs (not in memory) from the submit until the job runs.
STDIN_FILE = "stdin"


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


async def _till_done(work: Awaitable[T], stop: Callable[[], None]) -> T:
    """Await `work` (a thread's); if the caller is cancelled meanwhile, `stop` it and wait until
    it has ended before the cancellation goes on. The caller then removes what the thread wrote
    and gives its client's slot back, neither of which may happen while the thread still runs:
    the slot is what bounds each client's unpacking threads."""
    task = asyncio.ensure_future(work)
    del work  # (the same future when it is one: see `finally`)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        stop()
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what goes on
        raise
    finally:
        # The task holds what `work` raised (a refused upload's UploadError), whose traceback
        # holds this frame, which holds the task: a cycle only the collector could free.
        del task


class Intake(JobState):
    def admit(self, client: str) -> Reservation:
        """A slot for one submission of `client` (its rate key: the edge derives it from the
        address), taken before its body is read: a client over its limits is refused at once
        instead of after uploading. `cancel` it if the upload fails."""
        if not self.accepting:
            raise errors.shutting_down()
        self._check_queue_room()
        reservation = self.limiter.reserve(client)
        if not isinstance(reservation, Reservation):
            raise errors.rate_limited(reservation)
        return reservation

    def _check_queue_room(self) -> None:
        if len(self.queue) >= self.settings.max_queue:
            raise errors.queue_full(self.settings.max_queue)

    def cancel(self, reservation: Reservation) -> None:
        self.limiter.cancel(reservation)

    async def submit(
        self,
        client: str,
        manifest_text: str,
        parts: list[uploads.UploadPart],
        reservation: Reservation | None = None,
        deadline: float | None = None,
    ) -> SubmitResult:
        """Validate, unpack and enqueue a job (admitting it first unless `reservation` is given).

        The upload must be unpacked by `deadline` (`time.monotonic()`; by default `upload_timeout`
        from now): the front end passes the one it gave the reading of the body, so reading and
        unpacking together take at most `upload_timeout`."""
        if reservation is None:
            reservation = self.admit(client)
        elif not self.accepting:
            self.limiter.cancel(reservation)
            raise errors.shutting_down()
        job_dir = self.jobs_dir / new_job_id()
        try:
            if deadline is None:
                deadline = time.monotonic() + self.settings.upload_timeout
            job = await self._accept(client, manifest_text, parts, job_dir, deadline)
            self._check_queue_room()  # uploads admitted together may have filled it meanwhile
        except BaseException:
            self.limiter.cancel(reservation)
            await asyncio.to_thread(self._remove_files, job_dir.name)
            raise
        self.jobs[job.id] = job
        job.queued_at = self.clock()
        async with self._queue_changed:
            self.queue.add(job.id, client, job.manifest.timeout)
            self._queue_changed.notify_all()  # a worker may start it now, or none may yet
        self.metrics.accepted.inc()
        log.info("job %s accepted", job.id, extra=self._facts(job, event="job.accepted"))
        result = SubmitResult(job.id, "queued", self._position(job) or 0, job.job_hash)
        # A free slot's worker takes the job now, before this answer is written: its jail is
        # set up (in a thread) while the answer goes out, not after.
        await asyncio.sleep(0)
        return result

    async def _accept(
        self,
        client: str,
        manifest_text: str,
        parts: list[uploads.UploadPart],
        job_dir: Path,
        deadline: float,
        keep: bool = True,
    ) -> Job:
        """The job, its upload unpacked (see `_unpack`: `job_dir` or the staging tmpfs) and
        checked; with keep=False only checked (a cluster front end: what was unpacked is removed
        in the same thread, whatever happens). If it raises, the caller removes what it may have
        written (`_remove_files`)."""
        s = self.settings
        try:
            parsed = manifest.parse(
                manifest_text,
                interpreters=set(self.interpreters),
                environments=set(TEMPLATES),
                max_timeout=s.max_timeout,
                max_memory_mb=s.max_memory_mb,
            )
        except manifest.ManifestError as error:
            raise errors.invalid_manifest(str(error)) from None
        if not parts:
            raise errors.invalid_files("no files were uploaded (form field `files`)")
        budget = uploads.Budget(s.storage_mb * 1_000_000, s.max_entries, deadline)
        stdin = parsed.stdin.encode()
        spent = [0.0]  # the unpacking thread's CPU: the client's, whether the upload is refused
        staged: list[Path | None] = [None]

        def unpack() -> None:
            started = time.thread_time()
            try:
                staged[0] = self._unpack(parts, job_dir, budget, stdin)
            finally:
                spent[0] += time.thread_time() - started
                if not keep:
                    self._remove_files(job_dir.name)

        try:
            if not self._unpacked_here(unpack, parts, stdin, budget, job_dir):
                # Handed to the executor at once, as `sandbox.awaiting.in_thread_to_the_end` does
                # (`to_thread` would first need a task and a turn of the loop); not named here,
                # for the reason `_till_done` deletes its own name of it.
                loop = asyncio.get_running_loop()
                await _till_done(loop.run_in_executor(None, unpack), budget.stop)
        except uploads.UploadError as error:
            raise errors.invalid_files(str(error)) from None
        except uploads.Expired:
            raise errors.UploadTimeout(
                f"the upload was not received and unpacked within {s.upload_timeout:g} s"
            ) from None
        finally:
            self.limiter.charge(client, spent[0])
        inputs = {item.path: item.sha256 for item in budget.files}
        if parsed.entrypoint not in inputs:
            raise errors.invalid_manifest(
                f"entrypoint not found in the upload: {parsed.entrypoint}"
            )
        return Job(
            id=job_dir.name,
            client=client,
            # Hashed with its stdin; held without it (up to 1 MiB, in the job dir till it runs).
            manifest=msgspec.structs.replace(parsed, stdin=""),
            inputs=budget.files,
            job_hash=signing.job_hash(parsed, inputs.items()),
            directory=job_dir,
            log=Log(s.log_cap_mb * 2**20),
            stdin=bool(stdin),
            staged=staged[0],
        )

    def _unpacked_here(
        self,
        unpack: Callable[[], None],
        parts: list[uploads.UploadPart],
        stdin: bytes,
        budget: uploads.Budget,
        job_dir: Path,
    ) -> bool:
        """Whether `unpack` unpacked the upload here, on the event loop's thread: only a little
        one is tried (`uploads.LITTLE_UPLOAD` bytes as sent, and its stdin), under the budget's
        `little` bounds too. One that goes beyond them is removed, and False says to unpack it
        anew in a thread, under its own budget only (its CPU so far still counts)."""
        if len(stdin) > uploads.LITTLE_UPLOAD or _sent_bytes(parts) > uploads.LITTLE_UPLOAD:
            return False
        budget.little = (uploads.LITTLE_INFLATED, uploads.LITTLE_ENTRIES)
        try:
            unpack()
            return True
        except uploads.NotLittle:
            self._remove_files(job_dir.name)
            budget.little = None
            budget.restart()
            return False

    def _unpack(
        self,
        parts: list[uploads.UploadPart],
        job_dir: Path,
        budget: uploads.Budget,
        stdin: bytes,
    ) -> Path | None:
        """Unpack the upload (and write the stdin) where it waits until the job runs: the
        sandbox's staging tmpfs (returned) if there is one and the upload fits in what is left
        of it, else the job's dir on the state dir's disk (None). On the disk a hello world's
        two directories and one file took 0.6 to 1.4 ms of the server's CPU on this project's
        hosts (ext4 on a virtual disk), on the tmpfs a tenth of that; and the job dir itself is
        made only if something goes there (this fallback, or outputs)."""
        if self.staging is not None:
            staged = self.staging / job_dir.name
            try:
                _unpack_into(staged, parts, budget, stdin)
                return staged
            except OSError as error:
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
            # The staging tmpfs is full (uploads queued in RAM): this one waits on the disk.
            shutil.rmtree(staged, ignore_errors=True)
            budget.restart()
        _unpack_into(job_dir, parts, budget, stdin)
        return None


def _sent_bytes(parts: list[uploads.UploadPart]) -> int:
    """The file parts' sizes as sent, added up (their files are spooled: seeking is cheap)."""
    total = 0
    for part in parts:
        total += part.file.seek(0, os.SEEK_END)
        part.file.seek(0)
    return total


def _unpack_into(
    directory: Path, parts: list[uploads.UploadPart], budget: uploads.Budget, stdin: bytes
) -> None:
    directory.mkdir(mode=0o711)
    inputs = directory / "inputs"
    inputs.mkdir(mode=0o755)
    if stdin:  # only the server reads it: the runner hands the job a copy (see jail.py)
        with open(directory / STDIN_FILE, "xb", opener=_private) as handle:
            handle.write(stdin)
    uploads.unpack(parts, inputs, budget)
