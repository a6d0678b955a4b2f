"""The job's work dir, for real (root, a real tmpfs, real nsjail): every setup failure and every
cancellation leaves no mount, and copy-out writes at most the storage limit to the host's disk."""

import asyncio
import errno
import hashlib
import io
import os
import subprocess
import tarfile
import threading
from pathlib import Path

import httpx
import pytest

from jobrunner.sandbox import RunResult, RunSpec, Sandbox
from jobrunner.sandbox import procfs as procfs_module
from jobrunner.sandbox import workdir as workdir_module
from jobrunner.sandbox.cgroups import Cgroups
from jobrunner.sandbox.layout import Layout
from support.jobclient import GENEROUS, log_of, need_sandbox, run_job, submit, wait_finished
from support.servers import wait_until

DEEP = "/".join(["a"] * 500) + "/f"  # 1,001 characters: within the upload's name limit


def mounts_below(directory: Path) -> list[str]:
    targets = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [target for target in targets if target.startswith(f"{directory}/")]


def job_cgroups(state: Path, job_id: str) -> list[Path]:
    cgroups = Cgroups.detect(Layout.for_state(state).instance)
    assert cgroups is not None
    return [
        mount / cgroups.parent / job_id
        for mount in cgroups.mounts.values()
        if (mount / cgroups.parent / job_id).exists()
    ]


def allocated(directory: Path) -> int:
    """Bytes the files below `directory` take on the disk (holes take none)."""
    return sum(path.lstat().st_blocks * 512 for path in directory.rglob("*"))


def apparent(directory: Path) -> int:
    return sum(path.lstat().st_size for path in directory.rglob("*") if path.is_file())


def page_hungry_tarball(files: int, size: int) -> bytes:
    """Files that fit the upload's byte budget but, rounded up to pages, not the tmpfs."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        code = b"print('ran')\n"
        info = tarfile.TarInfo("main.py")
        info.size = len(code)
        archive.addfile(info, io.BytesIO(code))
        for n in range(files):
            info = tarfile.TarInfo(f"f{n}")
            info.size = size
            archive.addfile(info, io.BytesIO(bytes(size)))
    return buffer.getvalue()


# --- filling the work dir -------------------------------------------------------------------------


def test_fill_copies_any_depth_and_size_keeps_modes_and_times_and_follows_no_link(state_dir):
    need_sandbox()  # root: the copies go to the job's user
    inputs, work = state_dir / "inputs", state_dir / "work"
    deep = inputs
    inputs.mkdir()
    for _ in range(600):  # deeper than copytree's recursion goes (shutil.rmtree's still does)
        deep = deep / "d"
        deep.mkdir()
    (deep / "f").write_text("bottom")
    (inputs / "run.sh").write_text("#!/bin/sh\n")
    (inputs / "run.sh").chmod(0o751)
    (inputs / "sealed").mkdir(mode=0o500)
    os.utime(inputs / "run.sh", (1_000_000_000, 1_000_000_000))
    os.utime(inputs / "d", (1_000_000_000, 1_000_000_000))
    (inputs / "link").symlink_to("/etc/passwd")
    big = os.urandom(3 * 2**20 + 17)  # copied in the kernel, maybe in several calls: all of it
    (inputs / "big.bin").write_bytes(big)
    (inputs / "empty").write_bytes(b"")
    work.mkdir()
    workdir_module.fill(inputs, work, 2_000_000_007)  # the job's host uid and gid
    assert (work / "big.bin").read_bytes() == big and (work / "empty").read_bytes() == b""
    copy = work.joinpath(*["d"] * 600, "f")
    assert copy.read_text() == "bottom" and copy.stat().st_uid == 2_000_000_007
    assert (work / "run.sh").stat().st_mode & 0o7777 == 0o751
    assert (work / "sealed").stat().st_mode & 0o7777 == 0o500
    assert (work / "run.sh").stat().st_mtime == (work / "d").stat().st_mtime == 1_000_000_000
    assert (work / "d").stat().st_uid == (work / "run.sh").stat().st_gid == 2_000_000_007
    assert not (work / "link").exists() and not (work / "link").is_symlink()


# --- setup and cleanup through the server --------------------------------------------------------


def test_a_500_level_deep_upload_runs_and_leaves_no_mount(server, state_dir):
    code = f"print(open({DEEP!r}).read())\n"
    response = submit(server.url, {"main.py": code, DEEP: "deep"}, {"entrypoint": "main.py"})
    assert response.status_code == 200, response.text
    job_id = response.json()["job_id"]
    record = wait_finished(server.url, job_id)
    assert record["status"] == "completed", log_of(server.url, job_id)
    assert log_of(server.url, job_id) == "deep\n"
    work = Layout.for_state(state_dir / "s0").work

    def torn_down() -> bool:
        # A job is published before its jail's teardown (which follows at once, in the same
        # thread trip): its mount, work dir and cgroups go just after its record says finished.
        return not [target for target in mounts_below(work) if job_id in target] and not (
            (work / job_id).exists() or job_cgroups(state_dir / "s0", job_id)
        )

    assert wait_until(torn_down, timeout=30), mounts_below(work)
    assert run_job(server.url, "print('next')\n")["status"] == "completed"


def test_inputs_that_would_not_fit_the_tmpfs_are_refused_at_submit(start_server, state_dir):
    # 200 files of 4097 bytes: 0.82 MB of content but 1.6 MB of tmpfs pages, for a 1 MB work dir.
    # The upload is charged in pages, so it never reaches the sandbox (which would fail it
    # `storage_limit` without leaking its mount: test_inputs_larger_than_the_tmpfs_...); 120 such
    # files (0.98 MB of pages) still run.
    server = start_server(*GENEROUS, env={"JOBRUNNER_STORAGE_MB": "1"})
    refused = submit(server.url, page_hungry_tarball(200, 4097), {"entrypoint": "main.py"})
    assert refused.status_code == 400, refused.text
    assert "exceeds the 1 MB storage limit" in refused.json()["details"]
    work = Layout.for_state(state_dir / "s0").work
    assert not mounts_below(work)
    accepted = submit(server.url, page_hungry_tarball(120, 4097), {"entrypoint": "main.py"})
    assert accepted.status_code == 200, accepted.text
    record = wait_finished(server.url, accepted.json()["job_id"])
    assert record["status"] == "completed", record
    # Published before its jail's teardown: the mount goes just after.
    assert wait_until(lambda: not mounts_below(work), timeout=30), mounts_below(work)
    server.stop()  # a graceful stop leaves no mount either
    assert not mounts_below(work)


# --- setup and cleanup of the sandbox itself, in this process -------------------------------------


def make_spec(state: Path, job_id: str, inputs: dict[str, bytes], storage_bytes: int) -> RunSpec:
    job_dir = state / "jobs" / job_id
    (job_dir / "inputs").mkdir(parents=True)
    for name, data in inputs.items():
        (job_dir / "inputs" / name).write_bytes(data)
    return RunSpec(
        job_id=job_id,
        job_dir=job_dir,
        environment=state,  # never reached: these jobs stop in their setup
        argv=["/usr/bin/true"],
        env={},
        timeout=10,
        memory_bytes=64 * 2**20,
        cpu_seconds=10,
        storage_bytes=storage_bytes,
        storage_inodes=100,
        output_patterns=["**"],
        inputs={},
        max_outputs=10,
    )


@pytest.fixture
def sandbox(state_dir):
    need_sandbox()
    state = state_dir / "in-process"
    state.mkdir(mode=0o711)
    found = Sandbox.find(state)
    yield found
    found.close()


def assert_nothing_left(sandbox: Sandbox, spec: RunSpec) -> None:
    assert not mounts_below(sandbox.layout.work)
    assert not (sandbox.layout.work / spec.job_id).exists()
    assert not (sandbox.layout.proc / spec.job_id).exists()
    assert sandbox.job_ids.free == 1  # its uid was given back
    cgroups = sandbox.cgroups
    assert not [m for m in cgroups.mounts.values() if (m / cgroups.parent / spec.job_id).exists()]


def fail_cgroups(sandbox: Sandbox, spec: RunSpec, monkeypatch) -> None:
    def refuse(job_id: str, memory_bytes: int) -> None:
        raise OSError(errno.ENOSPC, "no room for a cgroup")

    monkeypatch.setattr(sandbox.cgroups, "create", refuse)


def fail_proc_files(sandbox: Sandbox, spec: RunSpec, monkeypatch) -> None:
    # After the mount and the inputs. (This was a job dir's `outputs/` made beforehand, when the
    # setup made it; now the outputs' collection makes it, when there is an output.)
    def refuse(directory: Path, memory_bytes: int) -> None:
        raise OSError(errno.ENOSPC, "no room for the job's /proc files")

    monkeypatch.setattr(procfs_module, "write", refuse)


def fail_fill(sandbox: Sandbox, spec: RunSpec, monkeypatch) -> None:
    def explode(inputs: Path, work: Path, owner: int) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(workdir_module, "fill", explode)


@pytest.mark.parametrize("failure", [fail_cgroups, fail_proc_files, fail_fill])
def test_setup_failures_of_any_kind_leave_no_mount(sandbox, state_dir, monkeypatch, failure):
    spec = make_spec(state_dir / "in-process", "setup-failure", {"main.py": b"x"}, 2**20)
    failure(sandbox, spec, monkeypatch)
    with pytest.raises((OSError, RecursionError)):
        asyncio.run(sandbox.run(spec, lambda _: None))
    assert_nothing_left(sandbox, spec)


def test_the_result_is_handed_over_without_waiting_for_the_teardown(
    sandbox, state_dir, monkeypatch
):
    # The server publishes a job from `on_result` while its jail is taken down: the result must
    # be final then (its outputs copied out), the teardown must not hold it back, and nothing
    # may be left once `run` has returned. Here the teardown waits until the result is out.
    spec = make_spec(state_dir / "in-process", "handed-over", {"data.txt": b"kept"}, 2**20)
    published = threading.Event()
    waited: list[bool] = []
    seen: list[tuple[RunResult, bytes]] = []
    real_remove = sandbox.cgroups.remove

    def remove_once_published(job_id: str) -> None:
        waited.append(published.wait(10))
        real_remove(job_id)

    def on_result(result: RunResult) -> None:
        seen.append((result, (spec.job_dir / "outputs" / "data.txt").read_bytes()))
        published.set()

    monkeypatch.setattr(sandbox.cgroups, "remove", remove_once_published)
    result = asyncio.run(sandbox.run(spec, lambda _: None, on_result=on_result))
    assert result.failure is None and result.exit_code == 0, result
    assert [out.path for out in result.outputs] == ["data.txt"]
    assert seen == [(result, b"kept")] and waited == [True]
    assert_nothing_left(sandbox, spec)


def test_inputs_larger_than_the_tmpfs_are_a_storage_limit(sandbox, state_dir):
    spec = make_spec(state_dir / "in-process", "no-room", {"big": os.urandom(300_000)}, 64 * 1024)
    result = asyncio.run(sandbox.run(spec, lambda _: None))
    assert result.failure == "storage_limit" and result.exit_code is None
    assert result.note is not None and result.note.startswith("storage limit of")
    assert_nothing_left(sandbox, spec)


def test_cancelled_mid_setup_waits_for_the_setup_then_leaves_no_mount(
    sandbox, state_dir, monkeypatch
):
    # The server's stop cancels its workers once the grace period is over; a job may be in its
    # setup then, in a thread nobody can stop: what that thread mounts must still be undone.
    filling, release = threading.Event(), threading.Event()
    real_fill = workdir_module.fill

    def slow_fill(inputs: Path, work: Path, owner: int) -> None:
        filling.set()
        release.wait(30)
        real_fill(inputs, work, owner)

    monkeypatch.setattr(workdir_module, "fill", slow_fill)
    spec = make_spec(state_dir / "in-process", "cancelled", {"main.py": b"x"}, 2**20)

    async def scenario() -> None:
        task = asyncio.create_task(sandbox.run(spec, lambda _: None))
        assert await asyncio.to_thread(filling.wait, 30)
        assert mounts_below(sandbox.layout.work)  # mounted, being filled
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert_nothing_left(sandbox, spec)


def test_a_work_dir_holds_little_by_its_own_counters(sandbox):
    # What decides whether a job is concluded on the event loop's thread: the tmpfs's counters,
    # never a walk of what the job left.
    work = sandbox.layout.work / "holds-little"
    work.mkdir()
    workdir_module.mount_tmpfs(work, 2**20, 100, 65534)
    try:
        assert workdir_module.holds_little(work)  # empty: its root only
        files = [work / f"f{n}" for n in range(workdir_module.LITTLE_INODES - 1)]
        for path in files:  # one page each: 15 pages, and 16 entries with the root
            path.write_bytes(b"x")
        assert workdir_module.holds_little(work)
        (work / "one-too-many").mkdir()  # a directory is an entry as a file is
        assert not workdir_module.holds_little(work)
        (work / "one-too-many").rmdir()
        for path in files:
            path.unlink()
        files[0].write_bytes(bytes(workdir_module.LITTLE_BYTES))
        assert workdir_module.holds_little(work)
        files[0].write_bytes(bytes(workdir_module.LITTLE_BYTES + 1))  # one page more
        assert not workdir_module.holds_little(work)
    finally:
        workdir_module.unmount(work)
        work.rmdir()


def test_close_unmounts_what_jobs_left(sandbox):
    leftover = sandbox.layout.work / "left-by-a-job"
    leftover.mkdir()
    workdir_module.mount_tmpfs(leftover, 2**20, 100, 65534)
    assert mounts_below(sandbox.layout.work)
    sandbox.close()
    assert not mounts_below(sandbox.layout.work) and not leftover.exists()


# --- copy-out: at most the storage limit reaches the host's disk ----------------------------------

LIMIT = 8_000_000  # JOBRUNNER_STORAGE_MB=8


@pytest.fixture
def small_server(start_server):
    return start_server(*GENEROUS, env={"JOBRUNNER_STORAGE_MB": "8"})


def not_listed(log: str) -> list[str]:
    return [line.split()[2] for line in log.splitlines() if " not listed: " in line]


def test_sparse_outputs_are_charged_their_size(small_server, state_dir):
    # Ten files of 3 MB each that take no room in the tmpfs: 30 MB for an 8 MB limit.
    code = (
        "for n in range(10):\n"
        "    with open(f'sparse{n}.bin', 'wb') as handle:\n"
        "        handle.truncate(3_000_000)\n"
    )
    record = run_job(small_server.url, code)
    log = log_of(small_server.url, record["job_id"])
    assert record["status"] == "failed" and record["failure"] == "output_limit", log
    assert sorted(record["output_files"]) == ["sparse0.bin", "sparse1.bin"]
    assert not_listed(log) == [f"sparse{n}.bin" for n in range(2, 10)], log
    assert "its 3000000 bytes exceed the 2000000 bytes left of the storage limit" in log
    assert log.splitlines()[-1].startswith("[jobrunner] "), log
    outputs = state_dir / "s0" / "jobs" / record["job_id"] / "outputs"
    assert apparent(outputs) <= LIMIT
    assert allocated(outputs) < 1_000_000  # the holes stay holes on the host
    zeros = hashlib.sha256(bytes(3_000_000)).hexdigest()
    assert record["output_files"]["sparse1.bin"]["sha256_hash"] == zeros
    download = httpx.get(f"{small_server.url}/download/{record['job_id']}/sparse1.bin")
    assert download.content == bytes(3_000_000)


def test_hard_linked_outputs_are_charged_each_time(small_server, state_dir):
    # One real 3 MB file under ten names: 30 MB to copy out for an 8 MB limit.
    code = (
        "import os\nopen('data0.bin', 'wb').write(os.urandom(3_000_000))\n"
        "for n in range(1, 10):\n    os.link('data0.bin', f'data{n}.bin')\n"
    )
    record = run_job(small_server.url, code)
    log = log_of(small_server.url, record["job_id"])
    assert record["status"] == "failed" and record["failure"] == "output_limit", log
    assert sorted(record["output_files"]) == ["data0.bin", "data1.bin"]
    assert not_listed(log) == [f"data{n}.bin" for n in range(2, 10)], log
    job_dir = state_dir / "s0" / "jobs" / record["job_id"]
    assert apparent(job_dir / "outputs") <= LIMIT
    assert allocated(job_dir) <= LIMIT + 1_000_000  # outputs, log and inputs together


def test_outputs_within_the_limit_are_all_kept(small_server):
    code = "for n in range(3):\n    open(f'out{n}.txt', 'w').write('x' * 1_000_000)\n"
    record = run_job(small_server.url, code)
    assert record["status"] == "completed", log_of(small_server.url, record["job_id"])
    assert sorted(record["output_files"]) == ["out0.txt", "out1.txt", "out2.txt"]


def test_removing_a_job_cgroup_that_still_holds_a_process_kills_it_and_removes_it(sandbox):
    # A job's cgroups are removed with one rmdir each when nsjail has emptied them (the usual
    # end). One that still holds a process is refused by the kernel: it must then be killed and
    # removed, children and all, as before.
    cgroups = sandbox.cgroups
    job_cgroup = cgroups.create("still-busy", 64 * 2**20)
    child = job_cgroup.dirs[-1] / "child"  # a cgroup below the job's, as nsjail makes
    child.mkdir()
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        for procs in job_cgroup.procs_files:
            procs.write_text(str(sleeper.pid))
        cgroups.remove("still-busy")
        assert sleeper.wait(timeout=60) == -9  # a deadline, not a timing: it is dead at once
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not [m for m in cgroups.mounts.values() if (m / cgroups.parent / "still-busy").exists()]
