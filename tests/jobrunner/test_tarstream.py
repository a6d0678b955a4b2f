"""Our tar reader: whatever tarfile, GNU tar and `git archive` write comes out exactly (a property
over random trees), and every header it does not take is refused by name, without reading on."""

import contextlib
import gzip
import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobrunner import tarstream
from jobrunner.tarstream import Corrupt, HeaderBudget, NotATar, Refused, TarReader, TooLarge
from jobrunner.uploads import Budget, extract_tarball
from support import require
from support.hostiletar import BLOCK, GNU, end, entry, header, padded, record

# --- the property: random trees round-trip through tarfile's three formats -----------------------

_chars = st.characters(codec="utf-8", exclude_characters="/\x00")
segment = st.one_of(
    st.text(_chars, min_size=1, max_size=12),
    st.text(_chars, min_size=60, max_size=160),  # names past ustar's 100 bytes
).filter(lambda s: s not in (".", "..") and len(s.encode()) <= 255)
path = (
    st.lists(segment, min_size=1, max_size=10)
    .map("/".join)
    .filter(lambda p: len(p.encode()) <= 1024)
)
size = st.one_of(
    st.sampled_from([0, 1, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 10240]),
    st.integers(0, 3000),
)
mode = st.sampled_from([0o644, 0o755, 0o600, 0o700, 0o744])
FORMATS = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}


def content(length: int, seed: int) -> bytes:
    pattern = bytes((seed + i) % 251 for i in range(251))
    return (pattern * (length // 251 + 1))[:length]


def on_disk(root: Path) -> tuple[dict[str, tuple[bytes, bool]], set[str]]:
    """Files (content, user-executable) and directories below `root`, by relative path."""
    files, dirs = {}, set()
    for item in root.rglob("*"):
        relative = str(item.relative_to(root))
        if item.is_dir():
            dirs.add(relative)
        else:
            files[relative] = (item.read_bytes(), bool(item.stat().st_mode & 0o100))
    return files, dirs


def parents(paths: set[str]) -> set[str]:
    return {p.rsplit("/", i)[0] for p in paths for i in range(1, p.count("/") + 1)}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(sorted(FORMATS)),
    st.dictionaries(path, st.tuples(size, mode, st.integers(0, 250)), min_size=1, max_size=8),
    st.lists(path, max_size=3),
)
def test_trees_written_by_tarfile_come_out_exactly(tmp_path_factory, fmt, files, dirs):
    # A name cannot be a file and a directory at once: drop the files that are someone's parent.
    files = {n: f for n, f in files.items() if not any(o.startswith(n + "/") for o in files)}
    dirs = [d for d in dirs if not any(f == d or d.startswith(f + "/") for f in files)]
    buffer = io.BytesIO()
    written: dict[str, tuple[bytes, bool]] = {}
    explicit: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=FORMATS[fmt]) as archive:
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            try:
                archive.addfile(info)  # ustar refuses names it cannot split: not in the tree
            except ValueError:
                continue
            explicit.add(name)
        for name, (length, bits, seed) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = length, bits
            try:
                archive.addfile(info, io.BytesIO(content(length, seed)))
            except ValueError:
                continue
            written[name] = (content(length, seed), bool(bits & 0o100))
    buffer.seek(0)
    dest = tmp_path_factory.mktemp("dest")
    budget = Budget(10**8, 10_000)
    extract_tarball(buffer, dest, budget)
    assert on_disk(dest) == (written, explicit | parents(set(written) | explicit))
    assert {f.path: f.size for f in budget.files} == {n: len(d) for n, (d, _) in written.items()}


# --- archives made by GNU tar and git ------------------------------------------------------------


def sample_tree(root: Path) -> None:
    long_dir = "d" * 150
    (root / long_dir / ("ü" * 100)).mkdir(parents=True)  # 350 bytes of path
    (root / long_dir / ("ü" * 100) / ("n" * 200 + ".txt")).write_bytes(content(1025, 3))
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "😀 space.bin").write_bytes(content(512, 7))
    (root / "empty").write_bytes(b"")
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "empty-dir").mkdir()
    (root / ("x" * 200)).write_bytes(content(4097, 1))


@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_gnu_tar_archives_come_out_exactly(tmp_path, fmt):
    require(shutil.which("tar"), "GNU tar is not installed")
    tree = tmp_path / "tree"
    tree.mkdir()
    sample_tree(tree)
    archive = tmp_path / "a.tgz"
    subprocess.run(["tar", f"--format={fmt}", "-czf", archive, "-C", tree, "."], check=True)
    dest = tmp_path / "dest"
    dest.mkdir()
    with archive.open("rb") as raw:
        extract_tarball(raw, dest, Budget(10**8, 10_000))
    assert on_disk(dest) == on_disk(tree)


def test_git_archive_with_its_global_header_comes_out_exactly(tmp_path):
    require(shutil.which("git"), "git is not installed")
    tree = tmp_path / "tree"
    tree.mkdir()
    sample_tree(tree)
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    made = subprocess.run([*git, "archive", "--format=tar", "HEAD"], check=True, stdout=-1)
    assert made.stdout[156:157] == b"g"  # the commit id as a pax global comment
    dest = tmp_path / "dest"
    dest.mkdir()
    extract_tarball(io.BytesIO(gzip.compress(made.stdout)), dest, Budget(10**8, 10_000))
    shutil.rmtree(tree / ".git")
    (tree / "empty-dir").rmdir()  # git keeps no empty directories
    assert on_disk(dest) == on_disk(tree)


# --- the reader on bytes written by hand ---------------------------------------------------------


def read(raw: bytes, **bounds: int) -> list[tuple[str, bool, int, bytes]]:
    reader = TarReader(
        io.BytesIO(raw),
        max_extended=bounds.get("max_extended", 64 * 1024),
        headers=HeaderBudget(bounds.get("max_extended_total", 1 << 20)),
    )
    return [(m.name, m.is_dir, m.mode, reader.read(1 << 30)) for m in reader.members()]


def test_numbers_octal_with_spaces_and_base256():
    spaced = header(b"a", size_field=b"     5 \x00\x00\x00\x00\x00") + padded(b"12345")
    base256 = header(b"b", size_field=b"\x80" + (3).to_bytes(11, "big")) + padded(b"xyz")
    assert read(spaced + base256 + end()) == [
        ("a", False, 0o644, b"12345"),
        ("b", False, 0o644, b"xyz"),
    ]


@pytest.mark.parametrize(
    "field",
    [b"\xff" + b"\xff" * 11, b"12a\x00" + bytes(8), b"0o17\x00" + bytes(7), b"-5\x00" + bytes(9)],
)
def test_a_negative_or_non_octal_size_is_corrupt(field):
    with pytest.raises(Corrupt, match="invalid size field"):
        read(entry(b"ok", b"") + header(b"a", size_field=field) + end())


def test_the_historic_signed_checksum_is_accepted():
    name = "é-signed".encode()  # bytes above 127: the two sums differ
    assert read(entry(name, b"s", signed_checksum=True) + end()) == [
        ("é-signed", False, 0o644, b"s")
    ]


def test_a_bad_checksum_is_not_a_tar_first_and_corrupt_later():
    bad = bytearray(entry(b"a", b"x"))
    bad[0:1] = b"b"
    with pytest.raises(NotATar, match="bad checksum"):
        read(bytes(bad) + end())
    with pytest.raises(Corrupt, match="bad checksum"):
        read(entry(b"ok", b"") + bytes(bad) + end())


def test_v7_headers_and_directories():
    v7 = {"magic": bytes(8)}
    raw = header(b"d/", kind=b"\x00", **v7) + entry(b"d/f", b"v7", b"\x00", **v7) + end()
    assert read(raw) == [("d", True, 0o644, b""), ("d/f", False, 0o644, b"v7")]


def test_the_prefix_counts_only_under_the_posix_magic():
    posix = entry(b"name", b"p", prefix=b"some/dir")
    gnu = entry(b"name", b"g", magic=GNU, prefix=b"00000000000\x0000000000000")  # atime, ctime
    assert [m[0] for m in read(posix + gnu + end())] == ["some/dir/name", "name"]


def test_executable_bit_and_directories_with_a_size_carry_no_data():
    raw = header(b"dir/", 4096, b"5", mode=0o755) + entry(b"dir/x", b"1", mode=0o755) + end()
    assert read(raw) == [("dir", True, 0o755, b""), ("dir/x", False, 0o755, b"1")]


@pytest.mark.parametrize(
    "tail",
    [end(), bytes(BLOCK), b"", end() + b"anything after the end is never read"],
    ids=["two-zero-blocks", "one-zero-block-then-eof", "eof-at-a-header", "after-the-end"],
)
def test_where_an_archive_may_end(tail):
    assert read(entry(b"a", b"x") + tail) == [("a", False, 0o644, b"x")]


def test_eof_inside_the_last_padding_is_tolerated():
    assert read(header(b"a", 3) + b"abc" + bytes(100)) == [("a", False, 0o644, b"abc")]


@pytest.mark.parametrize(
    ("raw", "error", "message"),
    [
        (b"", NotATar, "empty file"),
        (entry(b"a", b"x")[:300], NotATar, "truncated header"),
        (entry(b"a", b"x") + entry(b"b", b"y")[:300], Corrupt, "truncated header"),
        (header(b"a", 1000) + b"short", Corrupt, "a: unexpected end of data"),
        (entry(b"a", b"x") + bytes(BLOCK) + entry(b"b", b"y"), Corrupt, "lone zero block"),
    ],
    ids=["empty", "short-first-header", "short-header", "short-content", "lone-zero-block"],
)
def test_truncated_and_broken_streams(raw, error, message):
    with pytest.raises(error, match=message):
        read(raw)


# --- pax and GNU long names ----------------------------------------------------------------------


def pax(*records: bytes, kind: bytes = b"x", name: bytes = b"PaxHeaders/f") -> bytes:
    return entry(name, b"".join(records), kind)


def test_pax_path_and_size_override_the_header():
    raw = pax(
        record(b"path", "ü/".encode() * 300 + b"f"), record(b"size", b"3"), record(b"mtime", b"1.5")
    )
    raw += header(b"short", 0) + padded(b"abc") + end()
    assert read(raw) == [("ü/" * 300 + "f", False, 0o644, b"abc")]


def test_solaris_x_global_headers_empty_values_and_nul_padding():
    raw = pax(record(b"comment", b"c" * 500), kind=b"g", name=b"pax_global_header")
    raw += pax(record(b"path", b"from-pax"), kind=b"X")
    raw += entry(b"a", b"1")
    raw += pax(record(b"path", b""), record(b"size", b"")) + entry(b"b", b"2")  # empty: unset
    raw += entry(b"PaxHeaders/c", record(b"path", b"c2") + bytes(30), b"x") + entry(b"c", b"3")
    raw += end()
    assert [(m[0], m[3]) for m in read(raw)] == [("from-pax", b"1"), ("b", b"2"), ("c2", b"3")]


def test_gnu_long_names_and_both_kinds_before_one_member():
    long = b"L" * 900
    raw = entry(b"././@LongLink", long + b"\x00", b"L") + entry(b"x", b"1")
    raw += entry(b"././@LongLink", b"ignored\x00", b"L") + pax(record(b"path", b"pax-wins"))
    raw += entry(b"y", b"2") + end()
    assert [(m[0], m[3]) for m in read(raw)] == [(long.decode(), b"1"), ("pax-wins", b"2")]


@pytest.mark.parametrize(
    "payload",
    [
        b"5 a=b\n",  # the length is wrong
        b"abc a=b\n",
        b"6 ab\n\n",  # no '='
        b"5 =a\n",  # no key
        b"9 a=b\n",  # runs past the header
        b"6 a=bX",  # no newline at the record's end
        b"0 a=b\n",
        b"-6 a=\n",
        b"00000000000000006 a=\n",
        b"6 a=b\n\x01",
        b"6 a=b\n\x00\x00x",
        b"1" * 5000,
    ],
)
def test_malformed_pax_records_are_corrupt(payload):
    with pytest.raises(Corrupt, match="PaxHeaders/f: malformed pax record"):
        read(entry(b"PaxHeaders/f", payload, b"x") + entry(b"f", b"") + end())


@pytest.mark.parametrize("value", [b"-5", b"abc", b"1.5", b"9" * 40])
def test_an_invalid_pax_size_is_corrupt(value):
    with pytest.raises(Corrupt, match="invalid pax size"):
        read(pax(record(b"size", value)) + entry(b"f", b"") + end())


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (b"1", "a hard link"),
        (b"2", "a symbolic link"),
        (b"3", "a character device"),
        (b"4", "a block device"),
        (b"6", "a fifo"),
        (b"7", "a contiguous file"),
        (b"S", "a sparse file"),
        (b"K", "a GNU long link name"),
        (b"V", "a volume label"),
        (b"M", "a multi-volume continuation"),
        (b"N", "an old GNU long-name entry"),
        (b"D", "entry type b'D'"),
        (b"Z", "entry type b'Z'"),
    ],
)
def test_every_other_entry_type_is_refused_by_name_before_its_data(kind, what):
    raw = entry(b"ok", b"") + header(b"odd", 10**9, kind)  # its data is never there
    with pytest.raises(Refused) as refused:
        read(raw)
    assert str(refused.value) == f"odd: {what} is not allowed"


def test_gnu_sparse_keys_are_refused_naming_the_member():
    with pytest.raises(Refused, match=r"^real-name: a sparse file is not allowed$"):
        read(pax(record(b"path", b"real-name"), record(b"GNU.sparse.size", b"1")) + header(b"x"))
    with pytest.raises(Refused, match=r"^g: a sparse file is not allowed$"):
        read(pax(record(b"GNU.sparse.major", b"1"), kind=b"g", name=b"g") + end())


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (pax(record(b"path", b"p")) + end(), "PaxHeaders/f: an extended header with no member"),
        (entry(b"L1", b"name\x00", b"L"), "L1: an extended header with no member after it"),
        (pax(record(b"a", b"1")) * 2 + entry(b"f", b""), "two pax extended headers"),
        (entry(b"L2", b"n\x00", b"L") * 2 + entry(b"f", b""), "L2: two GNU long-name headers"),
    ],
)
def test_extended_headers_need_one_member_each(raw, message):
    with pytest.raises(Corrupt, match=message):
        read(raw)


def test_an_extended_header_over_its_bound_is_refused_before_it_is_read():
    # 2 MiB announced and none of it present: refused for its size, not for the missing data.
    with pytest.raises(TooLarge, match=r"^h: an extended .* of 2097152 bytes exceeds 64 KiB$"):
        read(header(b"h", 2 * 2**20, b"x"))


def test_extended_headers_are_bounded_in_total_and_per_record():
    payload = record(b"comment", b"c" * 900)
    comment = pax(payload, kind=b"g", name=b"g")
    cost = BLOCK + len(payload)  # its header block and its bytes
    assert read(comment * 3 + entry(b"f", b"") + end(), max_extended_total=3 * cost)
    with pytest.raises(TooLarge, match=f"extended headers exceed {3 * cost} bytes in total"):
        read(comment * 4 + entry(b"f", b"") + end(), max_extended_total=3 * cost)
    # 100 tiny records cost 64 bytes each, more than their 500 bytes: so parsing work is bounded.
    tiny = pax(*[b"5 a=\n"] * 100, kind=b"g", name=b"g")
    assert read(tiny + end(), max_extended_total=BLOCK + 6400) == []
    with pytest.raises(TooLarge):
        read(tiny + end(), max_extended_total=BLOCK + 6399)


def test_unread_content_is_skipped():
    reader = TarReader(
        io.BytesIO(entry(b"a", b"x" * 3000) + entry(b"b", b"y") + end()),
        max_extended=1024,
        headers=HeaderBudget(1024),
    )
    seen = []
    for member in reader.members():
        seen.append((member.name, reader.read(10)))
    assert seen == [("a", b"x" * 10), ("b", b"y")]


# --- anything else: read or refused, never another exception -------------------------------------

SAMPLE = (
    pax(record(b"comment", b"git"), kind=b"g", name=b"pax_global_header")
    + pax(record(b"path", "ü/long".encode() * 30), record(b"size", b"600"), record(b"mtime", b"1"))
    + header(b"f", 0, mode=0o755)
    + padded(content(600, 1))
    + entry(b"././@LongLink", b"n" * 200 + b"\x00", b"L")
    + entry(b"n", b"x")
    + header(b"d/", 0, b"5")
    + end()
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_any_pax_payload_is_read_or_refused(payload):
    with contextlib.suppress(tarstream.TarError):
        read(entry(b"PaxHeaders/f", payload, b"x") + entry(b"f", b"") + end())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(0, 255)), max_size=6),
    st.integers(0, len(SAMPLE)),
)
def test_damaged_archives_are_read_or_refused(flips, cut):
    damaged = bytearray(SAMPLE)
    for offset, value in flips:
        damaged[offset] = value
    with contextlib.suppress(tarstream.TarError):
        read(bytes(damaged[:cut]))
