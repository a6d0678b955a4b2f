"""Unpacking uploads: safe trees round-trip exactly; every unsafe entry is refused, writing nothing
outside the job (checked as properties and through the real server)."""

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobrunner.sandbox import workdir
from jobrunner.uploads import (
    HEADER_ALLOWANCE,
    LITTLE_ENTRIES,
    LITTLE_INFLATED,
    MAX_EXTENDED_HEADER,
    PAGE,
    Budget,
    NotLittle,
    UploadError,
    UploadPart,
    extract_tarball,
    safe_name,
    unpack,
)
from support import hostiletar, require
from support.hostiletar import BLOCK
from support.jobclient import submit, tarball, wait_finished
from support.servers import wait_until

segment = st.text(
    st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))
paths = st.lists(segment, min_size=1, max_size=3).map("/".join)


def build(entries: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for entry in entries:
            if isinstance(entry, tuple):
                archive.addfile(entry[0], io.BytesIO(entry[1]))
            else:
                archive.addfile(entry)
    buffer.seek(0)
    return buffer


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _entry(name: str, data: bytes) -> tuple[tarfile.TarInfo, io.BytesIO]:
    info, data = regular(name, data)
    return info, io.BytesIO(data)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.dictionaries(paths, st.binary(max_size=300), min_size=1, max_size=8))
def test_safe_trees_round_trip_exactly(tmp_path_factory, files):
    # Drop paths that are a prefix directory of another: a file cannot also be a directory.
    names = sorted(files)
    files = {
        n: d for n, d in files.items() if not any(other.startswith(n + "/") for other in names)
    }
    dest = tmp_path_factory.mktemp("dest")
    budget = Budget(10**6, 100)
    extract_tarball(build([regular(n, d) for n, d in files.items()]), dest, budget)
    assert tree(dest) == files
    assert {f.path for f in budget.files} == set(files)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        paths, st.binary(max_size=12_000) | st.integers(0, 90_000).map(bytes), max_size=24
    )
)
def test_little_bounds_unpack_the_same_tree_or_stop_within_them(tmp_path_factory, files):
    """Under the `little` bounds (a little upload unpacked on the event loop's thread) a tree is
    unpacked exactly as without them, or the unpacking stops with NotLittle, having inflated at
    most one byte past the bound and made at most one entry past it; unpacked anew without
    them, it is the same tree."""
    names = sorted(files)
    files = {
        n: d for n, d in files.items() if not any(other.startswith(n + "/") for other in names)
    }
    archive = build([regular(n, d) for n, d in files.items()]).getvalue()
    little = Budget(10**7, 1000, little=(LITTLE_INFLATED, LITTLE_ENTRIES))
    first = tmp_path_factory.mktemp("little")
    try:
        extract_tarball(io.BytesIO(archive), first, little)
    except NotLittle:
        assert little.inflated <= LITTLE_INFLATED + 1 and little.entries <= LITTLE_ENTRIES + 1
        again = Budget(10**7, 1000)
        second = tmp_path_factory.mktemp("anew")
        extract_tarball(io.BytesIO(archive), second, again)
        assert tree(second) == files and {f.path for f in again.files} == set(files)
        assert again.inflated > LITTLE_INFLATED or again.entries > LITTLE_ENTRIES
    else:
        assert tree(first) == files and {f.path for f in little.files} == set(files)
        assert little.inflated <= LITTLE_INFLATED and little.entries <= LITTLE_ENTRIES


unsafe_kinds = st.sampled_from(
    [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE]
)
unsafe_names = st.one_of(
    paths.map(lambda p: "/" + p),
    st.tuples(paths, paths).map(lambda t: f"{t[0]}/../../{t[1]}"),
    paths.map(lambda p: "../" + p),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(paths, max_size=3),
    st.one_of(unsafe_kinds.map(lambda k: ("kind", k)), unsafe_names.map(lambda n: ("name", n))),
)
def test_unsafe_entries_are_refused_and_nothing_lands_outside(tmp_path_factory, before, bad):
    outer = tmp_path_factory.mktemp("outer")
    dest = outer / "dest"
    dest.mkdir()
    entries: list = [regular(f"ok{i}-{p.replace('/', '_')}", b"fine") for i, p in enumerate(before)]
    if bad[0] == "kind":
        info = tarfile.TarInfo("evil")
        info.type = bad[1]
        info.linkname = "/etc/passwd"
        entries.append(info)
    else:
        entries.append(regular(bad[1], b"evil"))
    with pytest.raises(UploadError):
        extract_tarball(build(entries), dest, Budget(10**6, 100))
    assert os.listdir(outer) == ["dest"]  # nothing beside the destination
    assert all(data == b"fine" for data in tree(dest).values())


@given(st.text(max_size=40))
def test_safe_name_never_escapes(name):
    try:
        path = safe_name(name)
    except UploadError:
        return
    assert not path.startswith("/") and ".." not in path.split("/")
    assert os.path.normpath(os.path.join("/base", path or ".")).startswith("/base")


def _gibibyte_of_zeros() -> io.BytesIO:
    """A tarball of one 1 GiB file of zeros: about 1 MiB gzipped."""
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb") as zipped,
        tarfile.open(fileobj=zipped, mode="w|") as archive,
    ):
        info = tarfile.TarInfo("zeros.bin")
        info.size = 2**30
        archive.addfile(info, _Zeros(2**30))
    raw.seek(0)
    return raw


def test_gzip_bomb_stops_after_the_budget(tmp_path):
    # Extraction must stop near the 1 MB budget.
    raw = _gibibyte_of_zeros()
    with pytest.raises(UploadError, match="storage limit"):
        extract_tarball(raw, tmp_path, Budget(1_000_000, 100))
    assert sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()) == 0


def test_a_little_gzip_bomb_stops_one_byte_past_the_little_bound(tmp_path):
    """An archive that would inflate to 1 GiB: under the little bounds the inflating stops one
    byte past them, not a chunk (1 MiB) later."""
    raw = _gibibyte_of_zeros()
    budget = Budget(10**10, 100, little=(LITTLE_INFLATED, LITTLE_ENTRIES))
    with pytest.raises(NotLittle):
        extract_tarball(raw, tmp_path, budget)
    assert budget.inflated == LITTLE_INFLATED + 1


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


def test_too_many_entries(tmp_path):
    entries = [regular(f"f{i}", b"") for i in range(20)]
    with pytest.raises(UploadError, match="too many entries"):
        extract_tarball(build(entries), tmp_path, Budget(10**6, 10))


def test_directories_an_entry_implies_count_as_entries(tmp_path):
    # Three files 400 levels deep each make 400 directories (inodes on the host and in the job's
    # tmpfs): they once cost 3 entries of a 10,000 budget, so 10,000 such files made 4 million.
    deep = "/".join(["d"] * 400)
    entries = [regular(f"{top}/{deep}/f", b"x") for top in ("a", "b", "c")]
    (tmp_path / "no").mkdir()
    with pytest.raises(UploadError, match="too many entries"):
        extract_tarball(build(entries), tmp_path / "no", Budget(10**6, 1205))
    (tmp_path / "yes").mkdir()
    budget = Budget(10**6, 1206)  # 3 x 401 directories and 3 files fit exactly
    extract_tarball(build(entries), tmp_path / "yes", budget)
    assert budget.entries == 1206 and len(budget.files) == 3


def special(kind: bytes) -> bytes:
    info = tarfile.TarInfo("entry")
    info.type = kind
    info.linkname = "/etc/passwd"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.addfile(*_entry("main.py", b"print(1)"))
        archive.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("body", "details"),
    [
        (special(tarfile.SYMTYPE), "entry: a symbolic link is not allowed"),
        (special(tarfile.LNKTYPE), "entry: a hard link is not allowed"),
        (special(tarfile.CHRTYPE), "entry: a character device is not allowed"),
        (special(tarfile.BLKTYPE), "entry: a block device is not allowed"),
        (special(tarfile.FIFOTYPE), "entry: a fifo is not allowed"),
        (tarball({"main.py": "1", "/etc/cron.d/evil": "x"}), "/etc/cron.d/evil: absolute path"),
        (tarball({"main.py": "1", "../../escape.py": "x"}), "../../escape.py: path contains '..'"),
        (tarball({"main.py": "1", "a/../../escape.py": "x"}), "path contains '..'"),
        (b"this is not gzip", "not a valid gzip stream"),
        (gzip.compress(b"gzip but not a tar archive" * 30), "not a gzip-compressed tar archive"),
    ],
)
def test_server_refuses_bad_archives_with_400(server, state_dir, body, details):
    response = submit(server.url, body, {"entrypoint": "main.py"})
    assert response.status_code == 400
    assert response.json()["error"] == "Invalid manifest"
    assert details in response.json()["details"]
    # Nothing of the upload stays behind anywhere in the state dir.
    jobs = state_dir / "s0" / "jobs"
    assert list(jobs.iterdir()) == []
    assert not (state_dir / "escape.py").exists() and not Path("/tmp/escape.py").exists()


def test_server_refuses_gzip_bomb_early(server):
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb") as zipped,
        tarfile.open(fileobj=zipped, mode="w|") as archive,
    ):
        archive.addfile(*_entry("main.py", b"print(1)"))
        info = tarfile.TarInfo("zeros.bin")
        info.size = 2**30
        archive.addfile(info, _Zeros(2**30))
    assert len(raw.getvalue()) < 5 * 2**20
    response = submit(server.url, raw.getvalue(), {"entrypoint": "main.py"})
    assert response.status_code == 400
    assert "storage limit" in response.json()["details"]


@pytest.mark.parametrize(
    "extra",
    [
        {f"many/f{n}": f"{n}" for n in range(40)},  # more entries than a little upload's
        {"zeros.bin": bytes(3 * LITTLE_INFLATED)},  # inflates beyond a little upload's bytes
    ],
    ids=["many-entries", "inflates"],
)
def test_an_upload_little_as_sent_but_not_unpacked_runs_with_every_file(server, extra):
    """A few KiB as sent, more than a little upload once unpacked: it is unpacked anew in a
    thread, and the job finds every file, as sent, and the job hash counts them all."""
    body = tarball({"main.py": CHECK_ALL, **extra})
    assert len(body) < 16 * 1024  # little as sent: tried on the event loop's thread first
    expected = {
        name: hashlib.sha256(data if isinstance(data, bytes) else data.encode())
        for name, data in extra.items()
    }
    response = submit(
        server.url,
        body,
        {
            "entrypoint": "main.py",
            "args": [json.dumps({name: digest.hexdigest() for name, digest in expected.items()})],
        },
    )
    assert response.status_code == 200, response.text
    record = wait_finished(server.url, response.json()["job_id"])
    assert record["status"] == "completed", httpx.get(f"{server.url}/logs/{record['job_id']}").text
    assert httpx.get(f"{server.url}/logs/{record['job_id']}").text == f"all {len(extra)} files\n"


CHECK_ALL = """import hashlib, json, sys
wanted = json.loads(sys.argv[1])
for name, digest in wanted.items():
    assert hashlib.sha256(open(name, "rb").read()).hexdigest() == digest, name
print("all", len(wanted), "files")
"""


def test_executable_bit_is_kept_and_scripts_run(server):
    from support.jobclient import log_of, wait_finished

    scripts = {"go.sh": "#!/bin/bash\n./tool.sh\n", "tool.sh": "#!/bin/bash\necho tool ran\n"}
    response = httpx.post(
        f"{server.url}/submit",
        data={"manifest": '{"entrypoint": "go.sh"}'},
        files={"files": ("job.tar.gz", tarball(scripts, mode=0o755))},
    )
    record = wait_finished(server.url, response.json()["job_id"])
    assert record["status"] == "completed" and log_of(server.url, record["job_id"]) == "tool ran\n"


# --- issue 10: names that are not UTF-8, and extended headers -----------------------------------


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.binary(min_size=1, max_size=20).filter(lambda b: b"/" not in b and b"\0" not in b),
    st.sampled_from([tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT]),
)
def test_any_byte_name_is_either_kept_exactly_or_refused_with_400_text(tmp_path_factory, raw, fmt):
    name = raw.decode("utf-8", "surrogateescape")
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer, mode="w:gz", format=fmt, encoding="utf-8", errors="surrogateescape"
    ) as archive:
        info = tarfile.TarInfo(name)
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    buffer.seek(0)
    dest = tmp_path_factory.mktemp("dest")
    budget = Budget(10**6, 100)
    try:
        extract_tarball(buffer, dest, budget)
    except UploadError as error:
        message = str(error)
        message.encode("utf-8")  # always sendable as JSON
        assert message.isprintable()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            assert message.endswith(": the name is not valid UTF-8")
            return
        with pytest.raises(UploadError):  # valid UTF-8 refused only for the usual reasons
            safe_name(text)
        return
    # Accepted: the name is valid UTF-8, and the file is there under exactly that name.
    path = safe_name(raw.decode("utf-8"))
    if not path:  # "." names the archive's own directory: nothing to write
        assert budget.files == []
        return
    assert [f.path for f in budget.files] == [path]
    assert (dest / path).read_bytes() == b"x"


def test_a_huge_pax_header_is_refused_before_it_is_read():
    info = tarfile.TarInfo("main.py")
    info.size = 1
    info.pax_headers = {"comment": "c" * (2 * 2**20)}  # 2 MiB in one extended header
    buffer = build([(info, b"1")])
    with pytest.raises(UploadError, match=r"extended .* header of .* exceeds 64 KiB"):
        extract_tarball(buffer, Path("/nonexistent"), Budget(10**8, 100))


def test_a_long_but_bounded_pax_name_is_still_fine(tmp_path):
    name = "d/" * 200 + "f.txt"  # 605 characters: needs a pax header, under every bound
    buffer = build([regular(name, b"ok")])
    budget = Budget(10**6, 1000)
    extract_tarball(buffer, tmp_path, budget)
    assert (tmp_path / name).read_bytes() == b"ok"


# --- hostile tar headers: memory stays bounded whatever the headers claim -----------------------

# The child's peak RSS from VmHWM: its ru_maxrss starts at the parent's (Linux keeps it across
# exec), so under pytest it would hide any growth below pytest's own size.
_EXTRACT_AND_MEASURE = """
import sys, tempfile
from pathlib import Path
from jobrunner.uploads import Budget, UploadError, extract_tarball
def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
before = peak_kib()
with open(sys.argv[1], "rb") as raw, tempfile.TemporaryDirectory() as dest:
    try:
        extract_tarball(raw, Path(dest), Budget(100_000_000, 10_000))
    except UploadError as error:
        print(error, file=sys.stderr)
    else:
        sys.exit("accepted")
print(peak_kib() - before)
"""


@pytest.mark.parametrize("attack", sorted(hostiletar.ATTACKS))
def test_hostile_archives_are_refused_in_bounded_memory(tmp_path, attack):
    # tarfile turned these into 0.3 to 2 GB (pax keys, sparse maps, extension blocks).
    archive = tmp_path / "hostile.tgz"
    archive.write_bytes(hostiletar.ATTACKS[attack]())
    child = subprocess.run(
        [sys.executable, "-c", _EXTRACT_AND_MEASURE, archive],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert hostiletar.DETAILS[attack] in child.stderr
    assert int(child.stdout) < 50 * 1024  # KiB: under 50 MiB of growth


# --- storage is charged in the tmpfs's pages ------------------------------------------------------


def test_files_cost_whole_pages_and_empty_files_or_directories_none(tmp_path):
    directories = [tarfile.TarInfo(f"dir{i}") for i in range(5)]
    for info in directories:
        info.type = tarfile.DIRTYPE
    tree = [
        *directories,
        *(regular(f"empty{i}", b"") for i in range(50)),
        regular("two-pages", bytes(PAGE + 1)),
        regular("one-page", b"x"),
    ]
    budget = Budget(3 * PAGE, 100)
    extract_tarball(build(tree), tmp_path, budget)
    assert budget.used_bytes == 3 * PAGE
    with pytest.raises(UploadError, match=r"^another: the upload exceeds the 0 MB storage limit$"):
        extract_tarball(build([regular("another", b"x")]), tmp_path, budget)


def test_plain_files_cost_whole_pages_too(tmp_path):
    from jobrunner.uploads import save_plain_file

    budget = Budget(2 * PAGE, 10)
    save_plain_file("a", io.BytesIO(b"x"), tmp_path, budget)
    save_plain_file("b", io.BytesIO(bytes(PAGE)), tmp_path, budget)
    with pytest.raises(UploadError, match="storage limit"):
        save_plain_file("c", io.BytesIO(b"x"), tmp_path, budget)


def test_what_the_budget_accepts_fits_the_jobs_tmpfs_and_what_it_refuses_would_not(tmp_path):
    # The 9,000 x 8,193-byte case at a hundredth of the scale: 1 MB of storage, the tmpfs the
    # sandbox mounts for it. Content alone would fit both trees; pages fit only the first.
    require(os.geteuid() == 0, "mounting a tmpfs needs root")
    limit = 1_000_000
    fits = build([regular(f"f{i:03d}", bytes(8193)) for i in range(81)])  # 81 x 3 pages
    over = build([regular(f"f{i:03d}", bytes(8193)) for i in range(90)])  # 0.74 MB content
    (tmp_path / "fits").mkdir()
    extract_tarball(fits, tmp_path / "fits", Budget(limit, 1000))
    with pytest.raises(UploadError, match="f081: the upload exceeds the 1 MB storage limit"):
        (tmp_path / "refused").mkdir()
        extract_tarball(over, tmp_path / "refused", Budget(limit, 1000))
    over.seek(0)
    (tmp_path / "over").mkdir()
    extract_tarball(over, tmp_path / "over", Budget(10 * limit, 1000))  # for the tmpfs below
    for tree, room in (("fits", True), ("over", False)):
        work = tmp_path / f"work-{tree}"
        work.mkdir()
        workdir.mount_tmpfs(work, limit, 1000, 65534)
        try:
            if room:
                workdir.fill(tmp_path / tree, work, 65534)
            else:
                with pytest.raises(workdir.InputsDoNotFit):  # ENOSPC, as the sandbox says it
                    workdir.fill(tmp_path / tree, work, 65534)
        finally:
            workdir.unmount(work)


# --- uploads in parts: every budget is the upload's, whatever the number of parts ---------------

segments = st.text(alphabet="abc", min_size=1, max_size=2)


@st.composite
def uploads_in_parts(draw):
    """Files (short names, small sizes), each maybe after a pax global header of `5 a=\\n`
    records, cut into consecutive parts; one-file parts of a bare name may go as plain files."""
    chosen = draw(
        st.dictionaries(
            st.lists(segments, min_size=1, max_size=3).map("/".join),
            st.integers(0, 2 * PAGE + 1),
            min_size=1,
            max_size=8,
        )
    )
    files = {p: n for p, n in chosen.items() if not any(o.startswith(p + "/") for o in chosen)}
    comments = [draw(st.none() | st.integers(0, 1100)) for _ in files]
    cuts = sorted(draw(st.sets(st.integers(1, len(files) - 1))) if len(files) > 1 else [])
    limits = (draw(st.integers(1, 12)), draw(st.integers(1, 12)) * PAGE)
    return list(zip(files.items(), comments, strict=True)), cuts, draw(st.booleans()), limits


def members(chunk) -> list[bytes]:
    blocks = []
    for (path, size), records in chunk:
        if records is not None:
            blocks.append(hostiletar.entry(b"g", b"5 a=\n" * records, b"g"))
        blocks.append(hostiletar.entry(path.encode(), b"x" * size))
    return blocks


def as_part(n: int, chunk, plain: bool) -> UploadPart:
    (path, size), records = chunk[0]
    if plain and len(chunk) == 1 and "/" not in path and records is None:
        return UploadPart(path, io.BytesIO(b"x" * size))
    archive = hostiletar.gz(*members(chunk), hostiletar.end())
    return UploadPart(f"p{n}.tar.gz", io.BytesIO(archive))


def verdict(parts: list[UploadPart], dest: Path, limits: tuple[int, int]) -> str:
    entries, storage = limits
    try:
        unpack(parts, dest, Budget(storage, entries))
    except UploadError as error:
        return str(error)
    return "accepted"


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(uploads_in_parts())
def test_a_split_upload_is_accepted_iff_its_totals_fit_as_one_archive_would_be(
    tmp_path_factory, upload
):
    listed, cuts, plain, limits = upload
    whole = [
        UploadPart("all.tar.gz", io.BytesIO(hostiletar.gz(*members(listed), hostiletar.end())))
    ]
    bounds = zip([0, *cuts], [*cuts, len(listed)], strict=True)
    parts = [as_part(n, listed[start:stop], plain) for n, (start, stop) in enumerate(bounds)]
    split = verdict(parts, tmp_path_factory.mktemp("split"), limits)
    assert split == verdict(whole, tmp_path_factory.mktemp("whole"), limits)
    # The totals: entries (files and the directories they imply), pages, extended headers.
    files = [path for (path, _), _ in listed]
    directories = {path.rsplit("/", n)[0] for path in files for n in range(1, path.count("/") + 1)}
    pages = sum(-(-size // PAGE) * PAGE for (_, size), _ in listed)
    headers = sum(BLOCK + 64 * records for _, records in listed if records is not None)
    entries, storage = limits
    fits = (
        len(files) + len(directories) <= entries
        and pages <= storage
        and headers <= entries * HEADER_ALLOWANCE + MAX_EXTENDED_HEADER
    )
    assert (split == "accepted") == fits, split


# --- the parts attack of issue 22, on a real server: its CPU, measured from /proc ---------------


def cpu_seconds(pid: int) -> float:
    """The process's own user and system CPU time (not its children's: the jobs')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def from_ip(address: str, timeout: float) -> httpx.Client:
    """A client whose connections come from `address` (any of 127.0.0.0/8 reaches 127.0.0.1)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=timeout)


def post_parts(client: httpx.Client, url: str, files) -> httpx.Response:
    manifest = json.dumps({"entrypoint": "main.py"})
    return client.post(f"{url}/submit", files=files, data={"manifest": manifest})


@pytest.mark.parametrize(
    ("parts", "details"),
    [
        (400, "too many file parts: at most 32 per upload"),
        (31, "g: extended headers exceed 20545536 bytes in total"),
    ],
)
def test_many_parts_of_pax_headers_are_refused_in_little_cpu_while_health_answers(
    server, parts, details
):
    # Per-part bounds let 400 parts of 23 pax global headers each (1.2 MB) cost 110 s of the
    # server's CPU, and 31 parts 8 s; one budget per upload refuses them in a fraction of one.
    files = hostiletar.many_parts(parts)
    before = cpu_seconds(server.proc.pid)
    with (
        ThreadPoolExecutor(1) as pool,
        from_ip("127.0.0.1", 60) as client,
        from_ip("127.0.0.2", 30) as other,
    ):
        upload = pool.submit(post_parts, client, server.url, files)
        answered = 0
        while not upload.done() or not answered:
            assert other.get(f"{server.url}/health").json()["status"] == "healthy"
            answered += 1
        response = upload.result()
    assert response.status_code == 400, response.text
    assert details in response.json()["details"]
    assert cpu_seconds(server.proc.pid) - before < 5  # the old code: 110 s and 8 s


def test_parts_uploads_from_three_ips_leave_another_ips_submit_alone(start_server):
    # The review's run: twelve multi-part uploads from 3 IPs at once (4 each: a limit an
    # operator may set, or 3 clients with 2 addresses each) filled the thread pool (2 cores:
    # 2 + 8 threads), and a fourth IP's one-file submit waited behind them (88.6 s).
    server = start_server("--rate-concurrent", "4")
    files = hostiletar.many_parts(31)

    def upload(address: str) -> int:
        with from_ip(address, 300) as client:
            return post_parts(client, server.url, files).status_code

    before = cpu_seconds(server.proc.pid)
    with ThreadPoolExecutor(12) as pool:
        hostile = [pool.submit(upload, f"127.0.0.{n}") for n in (2, 3, 4) for _ in range(4)]
        # The victim comes while they are being unpacked: once they have cost the server a
        # CPU-second (the old code's took 8 s each), or have all been answered.
        assert wait_until(
            lambda: cpu_seconds(server.proc.pid) - before >= 1 or all(h.done() for h in hostile),
            120,
        )
        with from_ip("127.0.0.5", 30) as victim:  # the old code: 30 s were not enough
            response = victim.post(
                f"{server.url}/submit",
                files={"files": ("main.py", b"print(1)\n")},
                data={"manifest": json.dumps({"entrypoint": "main.py"})},
            )
        statuses = [done.result() for done in hostile]
    assert response.status_code == 200, response.text
    assert cpu_seconds(server.proc.pid) - before < 15  # about 4 s; the old code took 100
    assert statuses == [400] * 12
