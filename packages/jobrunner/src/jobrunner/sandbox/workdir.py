"""The job's work dir: a tmpfs of its own, filled with the inputs, read back after the run.

The tmpfs bounds storage (size and inodes) and its pages count against the job's memory cgroup.
Outputs are read only after every process of the jail has ended (the PID namespace is gone), and
each file is opened with O_NOFOLLOW after an lstat, so a job cannot point us at a host file.
What the tmpfs holds is no bound on what copying it out writes to the host's disk (a sparse file,
a file under many hard links): outputs are charged their size against the job's storage limit.
"""

import contextlib
import ctypes
import errno
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)
CHUNK = 1 << 20
# The staging tmpfs (`mount_staging`): at most this much RAM for queued uploads' bytes, and one
# inode per STAGING_BYTES_PER_INODE of it. An inode (with its dentry) is about 1 KiB of kernel
# memory that `size=` does not count and that cannot be swapped: 1 GiB allows 131,072 entries,
# 128 MiB more (a hostile review pinned 870 MB with a million empty files under 2^20 inodes).
STAGING_BYTES = 1 << 30
STAGING_BYTES_PER_INODE = 8192


def _mount(path: Path, flags: int, options: str) -> None:
    if _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", flags, options.encode()) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount tmpfs on {path}: {os.strerror(code)}")


def mount_tmpfs(path: Path, size_bytes: int, inodes: int, owner: int) -> None:
    """A tmpfs at `path` whose root belongs to `owner` (the job's host uid and gid)."""
    options = f"size={size_bytes},nr_inodes={inodes},mode=0755,uid={owner},gid={owner}"
    _mount(path, _MS_NOSUID | _MS_NODEV, options)


def mount_scratch(path: Path) -> None:
    """A small tmpfs at `path`, root's, that others may traverse but not list: for what comes and
    goes with every job (work-dir mount points, the files covering /proc, nsjail's log), which
    then never touches the host's disk. On this project's hosts (ext4 on a virtual disk) an rmdir
    there took 1.7 ms and an unlink 1 ms, each job needing several; on a tmpfs, microseconds."""
    options = "size=16m,nr_inodes=65536,mode=0711,uid=0,gid=0"
    _mount(path, _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options)


def mount_staging(path: Path) -> None:
    """The tmpfs where uploads wait for their jobs to run (root's alone: no jail reads it), so
    that a job's inputs never touch the host's disk on their way to its work dir. Its size caps
    the RAM queued uploads may take: an eighth of the host's memory, at most `STAGING_BYTES`,
    and an inode per `STAGING_BYTES_PER_INODE` of that (inodes are kernel memory beyond the
    size); an upload that does not fit in what is left, by bytes or by entries, waits on the
    disk instead (`Intake._unpack`). Like any tmpfs, its file data may be swapped out."""
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    size = min(STAGING_BYTES, memory // 8)
    inodes = max(1024, size // STAGING_BYTES_PER_INODE)
    options = f"size={size},nr_inodes={inodes},mode=0700,uid=0,gid=0"
    _mount(path, _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options)


def unmount(path: Path) -> None:
    if _libc.umount2(os.fsencode(path), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOENT):  # not mounted: nothing to undo
            raise OSError(code, f"unmount {path}: {os.strerror(code)}")


def mount_points_below(directory: Path) -> list[Path]:
    """Mount points strictly below `directory`, deepest first."""
    prefix = os.fsencode(directory.resolve()) + b"/"
    found = []
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            target = line.split()[4]
            # mountinfo escapes space, tab, newline and backslash as octal (\040 ...)
            target = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), target)
            if target.startswith(prefix):
                found.append(Path(os.fsdecode(target)))
    return sorted(set(found), key=lambda path: -len(path.parts))


def reap(directory: Path) -> list[str]:
    """Unmount and remove what jobs of an earlier run left below `directory` (their processes
    must be dead already). A directory still mounted after that is left alone, never deleted
    through: returns the names of those it kept."""
    if not directory.is_dir():
        return []
    for target in mount_points_below(directory):
        unmount(target)
    kept = []
    for entry in directory.iterdir():
        if os.path.ismount(entry) or mount_points_below(entry):
            kept.append(entry.name)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return kept


def is_full(path: Path, slack_bytes: int = 64 * 1024) -> bool:
    """Whether the job used up its storage (bytes or inodes)."""
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize < slack_bytes or info.f_favail == 0


# A work dir holding at most this much (files and directories, its root included; bytes in
# whole pages) is little enough to conclude on the event loop's thread (`Sandbox.run`).
LITTLE_INODES = 16
LITTLE_BYTES = 64 * 1024


def holds_little(path: Path) -> bool:
    """Whether the tmpfs at `path` holds at most `LITTLE_INODES` entries and `LITTLE_BYTES`: told
    by the filesystem's counters in one call, whatever the job left (walking a big tree to find
    out would itself block)."""
    info = os.statvfs(path)
    used_bytes = (info.f_blocks - info.f_bfree) * info.f_frsize
    return info.f_files - info.f_ffree <= LITTLE_INODES and used_bytes <= LITTLE_BYTES


class InputsDoNotFit(Exception):
    """The work dir ran out of room (bytes or inodes) while the inputs were copied in."""


def fill(inputs: Path, work: Path, owner: int) -> None:
    """Copy the inputs in and hand them to the job's host uid and gid `owner` (the inputs stay
    ours, unchanged).

    Directories and regular files only (an upload holds nothing else), never following a link;
    modes and times are kept. Iterative: a tree is as deep as an upload's names allow."""
    try:
        _copy_tree(inputs, work, owner)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise InputsDoNotFit from None
        raise


def _copy_tree(source: Path, target: Path, owner: int) -> None:
    # Plain strings, not Paths, and `_copy_file`'s descriptors: this is on every job's set-up,
    # and `shutil.copyfile` + `copystat` + `lchown` took 0.14 ms for a one-file upload.
    directories = [(str(source), str(target))]
    pending = [(str(source), str(target))]
    while pending:
        source_dir, target_dir = pending.pop()
        with os.scandir(source_dir) as entries:
            for entry in entries:
                there = os.path.join(target_dir, entry.name)
                if entry.is_dir(follow_symlinks=False):
                    os.mkdir(there, 0o700)
                    os.lchown(there, owner, owner)
                    directories.append((entry.path, there))
                    pending.append((entry.path, there))
                elif entry.is_file(follow_symlinks=False):
                    _copy_file(entry.path, there, owner)
    # Last, children first: writing into a directory changes its times.
    for here, there in reversed(directories):
        info = os.lstat(here)
        os.chmod(there, stat.S_IMODE(info.st_mode))
        os.utime(there, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


def _copy_file(source: str, target: str, owner: int) -> None:
    """One regular file, its bytes by `sendfile` (in the kernel), then its owner, its mode (after
    the owner: a chown clears set-id bits) and its times, all through the new file's descriptor.
    Neither end follows a link."""
    reading = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(reading)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        writing = os.open(target, flags, 0o600)
        try:
            left = info.st_size
            while left > 0 and (sent := os.sendfile(writing, reading, None, left)):
                left -= sent
            os.fchown(writing, owner, owner)
            os.fchmod(writing, stat.S_IMODE(info.st_mode))
            os.utime(writing, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(writing)
    finally:
        os.close(reading)


# --- outputs -------------------------------------------------------------------------------------

# How many problem records (unreadable directories, files not copied out) one job may leave in
# memory; beyond these they are only counted. A job can make ~10,000 unreadable directories whose
# paths are 4 KiB each: kept, they held 40 MB of the server per job for the whole retention.
MAX_PROBLEMS = 100

# Pattern tokens, in the order they are tried at each position (longest first).
_LITERAL, _ONE, _STAR, _GLOBSTAR, _DIRS = range(5)


def _tokens(pattern: str) -> list[tuple[int, str]]:
    """`**/` (zero or more leading directories), `**`, `*`, `?` and literal characters."""
    if pattern.endswith("/"):
        pattern += "**"
    tokens = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            tokens.append((_DIRS, ""))
            i += 3
        elif pattern.startswith("**", i):
            tokens.append((_GLOBSTAR, ""))
            i += 2
        elif pattern[i] in "*?":
            tokens.append((_STAR if pattern[i] == "*" else _ONE, ""))
            i += 1
        else:
            tokens.append((_LITERAL, pattern[i]))
            i += 1
    return tokens


class Patterns:
    """The output patterns: `*` and `?` stay within one path segment, `**` crosses any number,
    `**/` matches zero or more leading directories, `dir/` is everything below `dir`.

    Matching is a Thompson NFA simulated bit-parallel (shift-and), never backtracking: a
    regex with many `.*` (`**a**a**a**c`) took 13.6 s on a 70-character name, holding the GIL.
    A pattern of n tokens has states 0..n, state i meaning "the first i tokens matched"; every
    pattern gets its own range of bits of one Python int, so one step of a name's character
    moves all patterns at once. A character either advances a state over the token that takes
    it (shift left by one) or keeps it on a token that loops (`*`, `**`, and `**/` until its
    `/`). Then the states that `*`, `**` and `**/` lead to by matching nothing are added, along
    runs of such tokens: in a run of skippable bits, adding a reached bit carries through the
    rest of the run and one past it, and the xor shows the bits the carry flipped. A state that
    stayed on `**/` does not skip it: having read part of a directory's name, only the `/`
    leaves it. The work per character is a few operations on ints of as many bits as the
    patterns have tokens (at most 4,096 + 64: `manifest.MAX_PATTERN_CHARS`), so a name costs
    time linear in its length, whatever the patterns.

    States are plain ints, so a walk can keep the state of a directory and carry on from it
    for each entry: each name in the tree is then read once, and a directory no pattern can
    match below is never read (a dead state is 0).
    """

    def __init__(self, patterns: list[str]) -> None:
        self._literal: dict[str, int] = {}
        one = loop_in_segment = loop_anywhere = dirs = skippable = start = final = 0
        base = 0
        for pattern in patterns:
            tokens = _tokens(pattern)
            start |= 1 << base
            for offset, (kind, char) in enumerate(tokens):
                bit = 1 << (base + offset)
                if kind == _LITERAL:
                    self._literal[char] = self._literal.get(char, 0) | bit
                elif kind == _ONE:
                    one |= bit
                else:
                    skippable |= bit
                    if kind == _STAR:
                        loop_in_segment |= bit
                    else:
                        loop_anywhere |= bit
                        if kind == _DIRS:
                            dirs |= bit  # `(.*/)?`: loops on anything, leaves on a `/`
            final |= 1 << (base + len(tokens))
            base += len(tokens) + 1  # the final state's bit never moves on: no token there
        self._one, self._dirs, self._skippable, self._final = one, dirs, skippable, final
        self._loop_slash = loop_anywhere
        self._loop_other = loop_in_segment | loop_anywhere
        self.start = self._closure(start, start)

    def _closure(self, state: int, arrived: int) -> int:
        """`state` with every state reached by skipping `*`, `**`, `**/` tokens from a state
        of `arrived` (see the class)."""
        skippable = self._skippable
        return state | ((skippable + (arrived & skippable)) ^ skippable)

    def advance(self, state: int, text: str) -> int:
        """The state after reading `text` from `state` (0: no pattern can match any more)."""
        literal, one, loop_other, not_dirs = self._literal, self._one, self._loop_other, ~self._dirs
        slash_moves = literal.get("/", 0) | self._dirs
        for char in text:
            if not state:
                break
            if char == "/":
                moved, stayed = (state & slash_moves) << 1, state & self._loop_slash
            else:
                moved, stayed = (state & (literal.get(char, 0) | one)) << 1, state & loop_other
            state = self._closure(moved | stayed, moved | (stayed & not_dirs))
        return state

    def accepts(self, state: int) -> bool:
        return bool(state & self._final)

    def matches(self, path: str) -> bool:
        return self.accepts(self.advance(self.start, path))


@dataclass(frozen=True)
class Output:
    """A file copied out of the work dir. Names are the work dir's bytes decoded as the OS does
    (`surrogateescape`), so any name is kept exactly on disk; the service decides what the wire
    carries. `problem` says why a matching file could not be kept (never naming a host path)."""

    path: str
    size: int
    sha256: str
    problem: str | None = None


@dataclass(frozen=True)
class Collected:
    outputs: list[Output]  # those copied out, then those with a problem
    too_many: bool  # more matching files than allowed: the first were kept
    left_out: int  # matching files not copied out: larger than what was left of the budget
    unlisted: int = 0  # problems past the first MAX_PROBLEMS: counted, not kept


class _NoRoom(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def _reason(error: OSError) -> str:
    """An OSError as the job may read it: the errno's text, never the filename in the error."""
    return os.strerror(error.errno) if error.errno else type(error).__name__


def _walk(work: Path, wanted: Patterns, unreadable: Callable[[str, str], None]) -> Iterator[str]:
    """The regular files below `work` that a pattern matches, in the order `sorted` puts their
    paths: depth first, each directory's entries sorted by name (a directory's as `name/`).

    A directory below which no pattern can match is never read. One that cannot be read is
    reported to `unreadable` (its path with a trailing `/`, why). Every name is matched once,
    carrying on from the state of its directory: the work is linear in the names' total length,
    which the tmpfs bounds (inodes x 255 bytes), however deep the tree. The pending entries
    share their directory's path rather than each holding a copy of it.
    """
    # (directory path with its `/`, the state after it, name, is a directory), last one next
    pending: list[tuple[str, int, str, bool]] = [("", wanted.start, "", True)]
    while pending:
        parent, state, name, is_dir = pending.pop()
        state = wanted.advance(state, name)
        if not is_dir:
            if wanted.accepts(state):
                yield parent + name
            continue
        state = wanted.advance(state, "/") if name else state
        if not state:
            continue
        here = f"{parent}{name}/" if name else ""
        entries = []
        try:
            with os.scandir(work / here if here else work) as found:
                for entry in found:
                    if entry.is_dir(follow_symlinks=False):
                        entries.append((entry.name + "/", entry.name, True))
                    elif entry.is_file(follow_symlinks=False):
                        entries.append((entry.name, entry.name, False))
        except OSError as error:  # e.g. deeper than PATH_MAX allows from the host's side
            unreadable(here or "/", f"not read ({_reason(error)})")
            continue
        entries.sort(reverse=True)
        pending += [
            (here, state, entry_name, entry_is_dir) for _, entry_name, entry_is_dir in entries
        ]


def _digest(source: Path) -> str | None:
    """The SHA-256 of a regular file of the work dir (never through a link), or None."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _copy_out(source: Path, target: Path, room: int) -> Output | None:
    """Copy `source` if its size is at most `room` bytes (else `_NoRoom`), holes as holes."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(source, flags)
    except FileNotFoundError:
        return None  # vanished: not an output
    except OSError as error:
        if error.errno == errno.ELOOP:
            return None  # turned into a link: not an output
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > room:
            raise _NoRoom(info.st_size)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        try:
            with open(target, "xb") as out:
                # Never more than was charged, should the file grow.
                while size < info.st_size and (chunk := handle.read(CHUNK)):
                    chunk = chunk[: info.st_size - size]
                    digest.update(chunk)
                    if chunk.count(0) == len(chunk):
                        out.seek(len(chunk), os.SEEK_CUR)  # a hole on the host too
                    else:
                        out.write(chunk)
                    size += len(chunk)
                out.truncate()  # the file ends where the copy does, even in a hole
        except BaseException:
            with contextlib.suppress(OSError):
                target.unlink()
            raise
    return Output("", size, digest.hexdigest())


def collect(
    work: Path,
    outputs: Path,
    patterns: list[str],
    inputs: dict[str, str],
    max_files: int,
    max_bytes: int,
) -> Collected:
    """Copy the matching regular files that are not unchanged inputs from `work` to `outputs`,
    in path order, the first `max_files` of them and at most `max_bytes` by their size.

    Sizes are apparent sizes (`st_size`), whatever the tmpfs holds: a sparse file or one of many
    hard links costs its full size. A file larger than what is left is not copied; later,
    smaller ones still may be. Such a file, and one that cannot be copied (its path too long on
    the host, say), comes back with `problem` set; neither counts against `max_files`. So does a
    directory that cannot be read (`dir/`). The first MAX_PROBLEMS problems are kept, the
    others only counted (`unlisted`).
    """
    wanted = Patterns(patterns)
    kept: list[Output] = []
    problems: list[Output] = []
    unlisted = 0

    def problem(path: str, why: str) -> None:
        nonlocal unlisted
        if len(problems) < MAX_PROBLEMS:
            problems.append(Output(path, 0, "", why))
        else:
            unlisted += 1

    room = max_bytes
    left_out = 0
    made = False  # `outputs` (only the server's: 0700), made before the first file is copied
    for path in _walk(work, wanted, problem):
        # An input the job left as it was is no output (so not one too many either): hashed
        # where it is, not copied out first and deleted after (which took ~1 ms of every job
        # whose outputs are `**`, the default, for its main.py alone).
        if path in inputs and _digest(work / path) == inputs[path]:
            continue
        if len(kept) == max_files:
            return Collected(kept + problems, True, left_out, unlisted)
        if not made:
            # The job's dir too: an upload staged in RAM left none on the disk until now.
            outputs.parent.mkdir(mode=0o711, exist_ok=True)
            outputs.mkdir(mode=0o700, exist_ok=True)
            made = True
        try:
            copied = _copy_out(work / path, outputs / path, room)
        except _NoRoom as error:
            left_out += 1
            why = f"its {error.size} bytes exceed the {room} bytes left of the storage limit"
            problem(path, f"{why} (not copied out)")
            continue
        except OSError as error:
            problem(path, f"not copied out ({_reason(error)})")
            continue
        if copied is None:
            continue
        room -= copied.size
        kept.append(Output(path, copied.size, copied.sha256))
    return Collected(kept + problems, False, left_out, unlisted)
