"""Unpacking an upload into a job's input directory, by our own code and never a shell.

Only regular files and directories are accepted. Symlinks, hard links, devices, fifos, absolute
names and `..` are refused with the entry's name; so are duplicates and names that would turn a file
into a directory. The tar stream is read by `tarstream`, never by the standard library's tarfile.
An upload is a few form parts (tarballs and plain files), and every budget is the upload's, shared
by all its parts: entries, bytes on the job's tmpfs (whole pages), extended-header bytes (and so
their parsing work), inflated bytes (a gzip bomb stops after at most the storage limit plus a
little header overhead has been inflated) and time (the deadline is checked as the parts are
read). Files are created with O_EXCL|O_NOFOLLOW inside a directory we just made, so no entry can
write anywhere else.
"""

import gzip
import hashlib
import io
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

from jobrunner import paths, tarstream

CHUNK = 1 << 20
MAX_NAME = 1024
# pax and GNU long-name headers are held whole while they are parsed: bound each (a name is at
# most MAX_NAME), and all of them in one upload (HEADER_ALLOWANCE per entry, as for inflating).
MAX_EXTENDED_HEADER = 64 * 1024
HEADER_ALLOWANCE = 2048
# File parts one upload may have: a tarball plus a few plain files sent with `curl -F` (each plain
# file is a bare name, so a tree comes as a tarball anyway). Every part costs a spooled file and a
# pass through the unpacking, whatever the budgets: Starlette would take 1,000.
MAX_FILE_PARTS = 32
TARBALL_SUFFIXES = (".tar.gz", ".tgz")
# The job's work dir is a tmpfs, which gives a file whole pages (an empty file or a directory none).
PAGE = 4096


def occupied(size: int) -> int:
    """What a file of `size` bytes takes on the job's tmpfs."""
    return -(-size // PAGE) * PAGE


class UploadError(ValueError):
    """The upload is refused; the message is the `details` a client sees."""


class Expired(Exception):
    """The upload's deadline passed, or its request was cancelled, while it was being unpacked."""


class NotLittle(Exception):
    """The upload goes beyond its budget's `little` bounds: it is to be unpacked anew, in a thread
    (see `Intake._unpacked_here`)."""


# An upload of at most LITTLE_UPLOAD bytes as sent may be unpacked on the event loop's thread,
# under these bounds too: LITTLE_INFLATED bytes inflated, LITTLE_ENTRIES entries. A hello world's
# trip to a thread and back took 0.24 ms of its latency, more than its unpacking; a bigger one, or
# a small one that turns out big (a gzip bomb), is unpacked in a thread, so the loop never blocks
# for more than a little upload takes (a fraction of a millisecond).
LITTLE_UPLOAD = 16 * 1024
LITTLE_INFLATED = 64 * 1024
LITTLE_ENTRIES = 16


@dataclass(frozen=True)
class UploadPart:
    """One file part of the form: its file name as sent (or None) and its content."""

    filename: str | None
    file: BinaryIO


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    sha256: str


@dataclass
class Budget:
    """What one upload may still use, all its parts together: bytes on the job's tmpfs (in whole
    pages), entries, extended-header bytes, inflated bytes, and time until `deadline` (a
    `time.monotonic()` value; None: no deadline) unless `stop` was called."""

    max_bytes: int
    max_entries: int
    deadline: float | None = None
    used_bytes: int = 0
    entries: int = 0
    inflated: int = 0
    files: list[InputFile] = field(default_factory=list)
    headers: tarstream.HeaderBudget = field(init=False)
    stopped: bool = False
    # (inflated bytes, entries) beyond which the unpacking stops with NotLittle; None: no such
    # bounds, only the upload's own.
    little: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.headers = tarstream.HeaderBudget(self.allowance + MAX_EXTENDED_HEADER)

    @property
    def allowance(self) -> int:
        """Bytes of headers allowed on top of the content: HEADER_ALLOWANCE per entry."""
        return self.max_entries * HEADER_ALLOWANCE

    def restart(self) -> None:
        """All of it again, for the upload unpacked anew elsewhere: the deadline stays."""
        self.used_bytes = self.entries = self.inflated = 0
        self.files = []
        self.__post_init__()

    def stop(self) -> None:
        """From another thread: the unpacking ends (Expired) at its next check."""
        self.stopped = True

    def check_time(self) -> None:
        if self.stopped or (self.deadline is not None and time.monotonic() > self.deadline):
            raise Expired

    def add_inflated(self, count: int) -> None:
        """Bytes inflated from the upload's archives: content, headers and a little slack."""
        self.check_time()
        self.inflated += count
        if self.little is not None and self.inflated > self.little[0]:
            raise NotLittle
        if self.inflated > self.max_bytes + self.allowance + CHUNK:
            raise UploadError("the archives inflate beyond the storage limit")

    def inflatable(self, wanted: int) -> int:
        """How many bytes the next inflating step may produce of the `wanted`: with `little`
        bounds, one past them at most (so that a gzip bomb stops there, not a chunk later)."""
        if self.little is None:
            return wanted
        return max(1, min(wanted, self.little[0] - self.inflated + 1))

    def add_entry(self, name: str) -> None:
        self.entries += 1
        if self.little is not None and self.entries > self.little[1]:
            raise NotLittle
        if self.entries > self.max_entries:
            raise UploadError(f"too many entries (limit {self.max_entries}) at {name}")

    def add_file(self, size: int, name: str) -> None:
        """A whole file of `size` bytes, whose content `add_bytes` charged as it was written."""
        self.add_bytes(occupied(size) - size, name)

    def fits(self, size: int) -> bool:
        return self.used_bytes + occupied(size) <= self.max_bytes

    def add_bytes(self, count: int, name: str) -> None:
        self.used_bytes += count
        if self.used_bytes > self.max_bytes:
            raise UploadError(
                f"{name}: the upload exceeds the {self.max_bytes // 1_000_000} MB storage limit"
            )


class _Inflated(io.RawIOBase):
    """The decompressed stream, which refuses to inflate past the upload's bound (gzip bombs
    stop here) or its deadline."""

    def __init__(self, raw: BinaryIO, budget: Budget) -> None:
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: "WriteableBuffer") -> int:
        view = memoryview(buffer).cast("B")
        try:
            data = self._gzip.read(self._budget.inflatable(len(view)))
        except (OSError, EOFError, zlib.error) as error:
            raise UploadError(f"not a valid gzip stream ({error})") from None
        self._budget.add_inflated(len(data))
        view[: len(data)] = data
        return len(data)


def shown(name: str) -> str:
    """A name as one printable line: undecodable bytes as \\xNN, control characters escaped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def safe_name(name: str) -> str:
    """The entry's normalised relative path, or UploadError naming it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        # Names travel in JSON and signatures, which are UTF-8: refuse rather than guess.
        raise UploadError(f"{shown(name)}: the name is not valid UTF-8") from None
    try:
        path = paths.normalise(name)
    except paths.UnsafePath as error:
        raise UploadError(f"{shown(name)}: {error}") from None
    if len(path) > MAX_NAME or any(len(part.encode()) > 255 for part in path.split("/")):
        raise UploadError(f"{name[:80]}...: name too long")
    return path


def _make_dirs(dest: Path, relative: str, budget: Budget, *, named: bool = False) -> None:
    """The directories of `relative`, each one made costing an entry: a path 500 levels deep
    makes 500 directories (inodes, here and on the job's tmpfs), so they count like the entries
    the archive names. `named`: the last one is an archive entry itself, charged already."""
    parts = relative.split("/") if relative else []
    current = dest
    for depth, part in enumerate(parts, 1):
        current = current / part
        try:
            os.mkdir(current, 0o755)
        except FileExistsError:
            if current.is_symlink() or not current.is_dir():
                raise UploadError(f"{relative}: conflicts with a file of the same name") from None
            continue
        if not (named and depth == len(parts)):
            budget.add_entry("/".join(parts[:depth]))


def _write_file(
    dest: Path, path: str, read: Callable[[int], bytes], mode: int, budget: Budget
) -> None:
    parent = path.rpartition("/")[0]
    _make_dirs(dest, parent, budget)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(dest / path, flags, 0o755 if mode & 0o100 else 0o644)
    except FileExistsError:
        raise UploadError(f"{path}: duplicate entry") from None
    except IsADirectoryError:
        raise UploadError(f"{path}: conflicts with a directory of the same name") from None
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "wb") as out:
        while chunk := read(CHUNK):
            budget.check_time()
            budget.add_bytes(len(chunk), path)
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    budget.add_file(size, path)
    budget.files.append(InputFile(path, size, digest.hexdigest()))


def unpack(parts: Sequence[UploadPart], dest: Path, budget: Budget) -> None:
    """Every part into `dest` (an empty directory we own), in order, within one budget: a
    tarball by its name, or a nameless part by its gzip magic; any other part is a plain file."""
    if len(parts) > MAX_FILE_PARTS:
        raise UploadError(too_many_parts())
    for part in parts:
        budget.check_time()
        part.file.seek(0)
        name = part.filename or ""
        if name.endswith(TARBALL_SUFFIXES) or (not name and is_gzip(part.file.read(2))):
            part.file.seek(0)
            extract_tarball(part.file, dest, budget)
        else:
            save_plain_file(name, part.file, dest, budget)


def too_many_parts() -> str:
    return (
        f"too many file parts: at most {MAX_FILE_PARTS} per upload (send more files in one tarball)"
    )


def extract_tarball(raw: BinaryIO, dest: Path, budget: Budget) -> None:
    """Unpack a gzip-compressed tar stream into `dest`, charging `budget` (the upload's)."""
    inflated = io.BufferedReader(_Inflated(raw, budget))
    archive = tarstream.TarReader(
        inflated, max_extended=MAX_EXTENDED_HEADER, headers=budget.headers
    )
    try:
        for member in archive.members():
            _extract_member(archive, member, dest, budget)
    except tarstream.TarError as error:
        raise UploadError(_details(error)) from None


def _details(error: tarstream.TarError) -> str:
    where = "" if error.name is None else f"{shown(error.name)}: "
    if isinstance(error, tarstream.NotATar):
        return f"not a gzip-compressed tar archive ({error.reason})"
    if isinstance(error, tarstream.Corrupt):
        return f"corrupt tar archive ({where}{error.reason})"
    return f"{where}{error.reason}"


def _extract_member(
    archive: tarstream.TarReader, member: tarstream.Member, dest: Path, budget: Budget
) -> None:
    path = safe_name(member.name)
    budget.add_entry(path or ".")  # the archive's own "./" entry costs an entry, and no more
    if not path:
        return
    if member.is_dir:
        _make_dirs(dest, path, budget, named=True)
        return
    if not budget.fits(member.size):
        budget.add_bytes(occupied(member.size), path)  # raises with the storage-limit message
    _write_file(dest, path, archive.read, member.mode, budget)


def save_plain_file(name: str, source: BinaryIO, dest: Path, budget: Budget) -> None:
    """A file sent as its own form part: a bare file name, written at the top of the upload."""
    path = safe_name(name or "")
    if not path or "/" in path:
        raise UploadError(f"{name!r}: a plain file part needs a bare file name")
    budget.add_entry(path)
    _write_file(dest, path, source.read, 0o644, budget)


def is_gzip(head: bytes) -> bool:
    return head[:2] == b"\x1f\x8b"
