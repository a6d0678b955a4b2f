"""The client for people (library and command line) against a real server."""

import asyncio
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrunner.client import Client, JobrunnerError, pack, verify
from support.jobclient import GENEROUS, JOBRUNNER


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "in.txt").write_text("hello\n")
    (folder / "main.py").write_text(
        "import os, sys\nprint('read', open('data/in.txt').read().strip(), *sys.argv[1:])\n"
        "os.makedirs('out', exist_ok=True)\nopen('out/result.txt', 'w').write('done\\n')\n"
    )
    return folder


def test_library_submit_follow_download_verify(server, project, tmp_path):
    async def scenario():
        async with Client(server.url) as client:
            job = await client.submit(project, entrypoint="main.py", args=["x"])
            seen = "".join([text async for text in client.follow(job.job_id)])
            record = await client.status(job.job_id)
            saved = await client.download_all(job.job_id, tmp_path / "results")
            with pytest.raises(JobrunnerError) as missing:
                await client.status("no-such-job")
            return seen, record, saved, missing.value

    seen, record, saved, missing = asyncio.run(scenario())
    assert seen == "read hello x\n"
    assert record.status == "completed" and verify(record)
    assert verify(record, record.worker_metadata.worker_id)
    assert [p.relative_to(tmp_path / "results").as_posix() for p in saved] == ["out/result.txt"]
    assert saved[0].read_text() == "done\n"
    assert missing.status == 404 and missing.error == "Job not found"


def test_errors_carry_the_interface_fields(start_server, project):
    server = start_server("--rate-concurrent", "1")

    async def scenario():
        async with Client(server.url) as client:
            try:
                await client.submit(project, entrypoint="nope.py")
            except JobrunnerError as bad:
                invalid = bad
            await client.submit(tarball=pack(project), entrypoint="main.py")
            try:
                await client.submit(project, entrypoint="main.py")
            except JobrunnerError as refused:
                rate = refused
            return rate, invalid

    rate, invalid = asyncio.run(scenario())
    assert rate.status == 429 and rate.retry_after == 1 and "Concurrent" in rate.reason
    assert "retry after 1 s" in str(rate)
    assert invalid.status == 400 and invalid.error == "Invalid manifest"
    assert invalid.details == "entrypoint not found in the upload: nope.py"


def test_pack_keeps_relative_paths_and_skips_links(project, tmp_path):
    import io
    import tarfile

    (project / "link").symlink_to("/etc/passwd")
    with tarfile.open(fileobj=io.BytesIO(pack(project))) as archive:
        assert archive.getnames() == ["data/in.txt", "main.py"]
    with tarfile.open(fileobj=io.BytesIO(pack(project / "main.py"))) as archive:
        assert archive.getnames() == ["main.py"]


def test_command_line_submit_follow_download(start_server, project, tmp_path):
    server = start_server(*GENEROUS)
    env = {**os.environ, "JOBRUNNER_SERVER": server.url}
    done = subprocess.run(
        [
            JOBRUNNER,
            "submit",
            str(project),
            "--follow",
            "--arg",
            "y",
            "--download",
            str(tmp_path / "dl"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "read hello y\n"
    assert "completed, exit code 0" in done.stderr and "signature valid" in done.stderr
    assert (tmp_path / "dl" / "out" / "result.txt").read_text() == "done\n"
    job_id = subprocess.run(
        [JOBRUNNER, "submit", str(project / "main.py")], capture_output=True, text=True, env=env
    ).stdout.strip()
    followed = subprocess.run(
        [JOBRUNNER, "logs", "-f", job_id], capture_output=True, text=True, env=env, timeout=60
    )
    assert followed.stdout.startswith("read") or "Traceback" in followed.stdout
    listing = subprocess.run(
        [JOBRUNNER, "outputs", job_id], capture_output=True, text=True, env=env
    )
    assert listing.returncode == 0
    status = subprocess.run([JOBRUNNER, "status", job_id], capture_output=True, text=True, env=env)
    verified = subprocess.run(
        [JOBRUNNER, "verify", "-"], input=status.stdout, capture_output=True, text=True
    )
    assert verified.returncode == 0 and verified.stdout.startswith("signature valid")
    missing = subprocess.run([JOBRUNNER, "status", "nope"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and missing.stderr == "jobrunner: 404 Job not found: nope\n"
    offline = subprocess.run(
        [JOBRUNNER, "status", "x", "--server", "http://127.0.0.1:9"], capture_output=True, text=True
    )
    assert offline.returncode == 1 and "cannot reach the server" in offline.stderr


def test_command_line_submit_sets_every_manifest_field(start_server, tmp_path):
    """Design change of 2026-11-23: `jobrunner submit` has an option for every manifest field.
    The job shows the ones it can see; the record's job_hash (over the canonical manifest, every
    field) proves the server got exactly what was asked, limits included."""
    import hashlib

    import httpx

    from jobrunner.signing import job_hash
    from jobrunner.wire import Manifest

    server = start_server(*GENEROUS)
    folder = tmp_path / "fields"
    folder.mkdir()
    code = (
        "import os, sys\nprint('env', os.environ['GREETING'], 'args', *sys.argv[1:])\n"
        "os.makedirs('out', exist_ok=True)\nopen('out/kept.txt', 'w').write('k')\n"
        "open('dropped.txt', 'w').write('d')\n"
    )
    (folder / "run.py").write_text(code)
    options = ["--entrypoint", "run.py", "--interpreter", "python", "--environment", "default"]
    options += ["--arg", "a b", "--arg", "c", "--env", "GREETING=hi there", "--output", "out/"]
    options += ["--timeout", "30", "--memory-mb", "64"]
    done = subprocess.run(
        [JOBRUNNER, "submit", str(folder), *options, "--follow"],
        capture_output=True,
        text=True,
        env={**os.environ, "JOBRUNNER_SERVER": server.url},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "env hi there args a b c\n"
    job_id = done.stderr.split("job ", 1)[1].split()[0]
    listing = httpx.get(f"{server.url}/outputs/{job_id}").json()
    files = [entry["path"] for entry in listing["outputs"] if entry["type"] == "file"]
    assert files == ["out/kept.txt"]
    expected = Manifest(
        entrypoint="run.py",
        interpreter="python",
        args=["a b", "c"],
        environment="default",
        outputs=["out/"],
        env={"GREETING": "hi there"},
        timeout=30,
        memory_mb=64,
    )
    inputs = [("run.py", hashlib.sha256(code.encode()).hexdigest())]
    record = httpx.get(f"{server.url}/status/{job_id}").json()
    assert record["job_hash"] == job_hash(expected, inputs)


@pytest.mark.parametrize("upload_bytes", [0, 2**20 + 1], ids=["one-piece", "streamed"])
def test_a_submit_carries_every_byte_of_its_form_either_way(server, tmp_path, upload_bytes):
    """The library sends a small upload's form as one body it builds (with a boundary it checks
    against the bytes) and a bigger one through aiohttp's FormData: the server gets the same
    manifest, non-ASCII text included, and the same files, as the job shows."""
    import hashlib

    from jobrunner.client.library import ONE_PIECE_BYTES

    folder = tmp_path / "p"
    folder.mkdir()
    code = (
        "import hashlib, os, sys\nprint(*sys.argv[1:], os.environ['GREETING'])\n"
        "print(hashlib.sha256(open('blob', 'rb').read()).hexdigest())\n"
    )
    (folder / "main.py").write_text(code)
    blob = os.urandom(upload_bytes)  # incompressible: the tarball is larger than the blob
    (folder / "blob").write_bytes(blob)
    assert (len(pack(folder)) > ONE_PIECE_BYTES) == (upload_bytes > 0)

    async def scenario():
        async with Client(server.url) as client:
            record = await client.submit_and_wait(
                folder, entrypoint="main.py", args=["é ü", "雪"], env={"GREETING": "ß"}
            )
            log = [text async for text in client.follow(record.job_id)]
            return record, "".join(log)

    record, log = asyncio.run(scenario())
    assert record.status == "completed", log
    assert log == f"é ü 雪 ß\n{hashlib.sha256(blob).hexdigest()}\n"


@settings(max_examples=200, deadline=None)
@given(manifest=st.text(max_size=300), packed=st.binary(max_size=3000))
def test_a_one_piece_form_parses_back_to_its_manifest_and_bytes(manifest, packed):
    """What `_one_piece` builds, read by the server's own form parser (Starlette's), is the
    manifest text and the packed bytes exactly: CRLFs, dashes and any UTF-8 included."""
    from starlette.datastructures import UploadFile
    from starlette.requests import Request

    from jobrunner.client.library import _one_piece

    upload = _one_piece(manifest, packed)
    assert isinstance(upload.data, bytes)
    body = upload.data

    async def parsed():
        sent = False

        async def receive():
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        headers = [(b"content-type", upload.headers["Content-Type"].encode())]
        request = Request({"type": "http", "method": "POST", "headers": headers}, receive)
        form = await request.form()
        files = form.getlist("files")
        assert len(files) == 1 and isinstance(files[0], UploadFile)
        assert files[0].filename == "job.tar.gz"
        return form.get("manifest"), await files[0].read()

    assert asyncio.run(parsed()) == (manifest, packed)
