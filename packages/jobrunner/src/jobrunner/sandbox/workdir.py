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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)
CHUNK = 1 << 20


def mount_tmpfs(path: Path, size_bytes: int, inodes: int, owner: int) -> None:
    """A tmpfs at `path` whose root belongs to `owner` (the job's host uid and gid)."""
    options = f"size={size_bytes},nr_inodes={inodes},mode=0755,uid={owner},gid={owner}"
    if (
        _libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode())
        != 0
    ):
        code = ctypes.get_errno()
        raise OSError(code, f"mount tmpfs on {path}: {os.strerror(code)}")


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
    directories = [(source, target)]
    pending = [(source, target)]
    while pending:
        source_dir, target_dir = pending.pop()
        with os.scandir(source_dir) as entries:
            for entry in entries:
                here, there = Path(entry.path), target_dir / entry.name
                if entry.is_dir(follow_symlinks=False):
                    there.mkdir()
                    directories.append((here, there))
                    pending.append((here, there))
                elif entry.is_file(follow_symlinks=False):
                    shutil.copyfile(here, there, follow_symlinks=False)
                    shutil.copystat(here, there, follow_symlinks=False)
                else:
                    continue
                os.lchown(there, owner, owner)
    # Last, children first: writing into a directory changes its times.
    for here, there in reversed(directories):
        shutil.copystat(here, there, follow_symlinks=False)


# --- outputs -------------------------------------------------------------------------------------


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """`*` and `?` stay within one path segment, `**` crosses any number; `dir/` = all below dir."""
    if pattern.endswith("/"):
        pattern += "**"
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def matcher(patterns: list[str]) -> Callable[[str], bool]:
    compiled = [pattern_regex(p) for p in patterns]
    return lambda path: any(regex.fullmatch(path) for regex in compiled)


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


class _NoRoom(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def _reason(error: OSError) -> str:
    """An OSError as the job may read it: the errno's text, never the filename in the error."""
    return os.strerror(error.errno) if error.errno else type(error).__name__


def _regular_files(work: Path, problems: list[Output]) -> list[str]:
    found = []
    stack = [""]
    while stack:
        relative = stack.pop()
        try:
            with os.scandir(work / relative if relative else work) as entries:
                for entry in entries:
                    path = f"{relative}/{entry.name}" if relative else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(path)
                    elif entry.is_file(follow_symlinks=False):
                        found.append(path)
        except OSError as error:  # e.g. deeper than PATH_MAX allows from the host's side
            problems.append(Output(relative + "/", 0, "", f"not read ({_reason(error)})"))
    return sorted(found)


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
    the host, say), comes back with `problem` set; neither counts against `max_files`.
    """
    wanted = matcher(patterns)
    kept: list[Output] = []
    problems: list[Output] = []
    room = max_bytes
    left_out = 0
    for path in _regular_files(work, problems):
        if not wanted(path):
            continue
        if len(kept) == max_files:
            return Collected(kept + problems, True, left_out)
        try:
            copied = _copy_out(work / path, outputs / path, room)
        except _NoRoom as error:
            left_out += 1
            problem = f"its {error.size} bytes exceed the {room} bytes left of the storage limit"
            problems.append(Output(path, 0, "", f"{problem} (not copied out)"))
            continue
        except OSError as error:
            problems.append(Output(path, 0, "", f"not copied out ({_reason(error)})"))
            continue
        if copied is None:
            continue
        if inputs.get(path) == copied.sha256:  # an input the job left as it was
            (outputs / path).unlink()
            continue
        room -= copied.size
        kept.append(Output(path, copied.size, copied.sha256))
    return Collected(kept + problems, False, left_out)
