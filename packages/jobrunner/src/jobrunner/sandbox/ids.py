"""The host uid/gid each running job gets: one per job slot, so that no two jobs share a user.

The kernel keeps some limits per host user, whatever the namespaces: pipe buffer pages
(`fs.pipe-user-pages-soft`, counted in the kernel's `user_struct` of the host uid). Jobs running as
one host user shared it, so one job could use up another's (64 pipes of 1 MiB left every other
job's new pipes at two pages and refused them F_SETPIPE_SZ). Inside the jail every job is still
uid/gid 65534; only the host's side of the id map differs per slot.

This does not separate the limits the kernel counts per user namespace and charges up the chain
to the user that created the namespace (`ucounts`: inotify instances and watches, among others):
nsjail creates every jail's namespace as root, so those stay shared between jobs (128 inotify
instances held by one job left none for another, with per-job uids too).

The ids come from `RANGE_SIZE` ids starting at a configurable base (default `DEFAULT_BASE`,
2,000,000,000). systemd's table of uid ranges (systemd.io/UIDS-GIDS) leaves 1879048192-2147352575
unused: above the container ranges (524288-1879048191, which systemd-nspawn and others pick from),
below the foreign-image range (from 2147352576) and below 2^31 (tools that keep uids in a signed
int). It is far above regular users (to 60000), DynamicUser= (61184-65519) and the subordinate ids
`useradd` hands out (/etc/subuid, from 100000 by default). Still, a start refuses ids that the
user or group database names or that /etc/subuid or /etc/subgid delegates.

Several servers may run on one host (each with its own state dir): each takes its ids by holding
an exclusive `flock` on one file per id, under the jail tree, for as long as it runs. The lock goes
with the process (a crash frees it), and a server never takes an id another one holds.
"""

import contextlib
import fcntl
import grp
import os
import pwd
from pathlib import Path

DEFAULT_BASE = 2_000_000_000
RANGE_SIZE = 65536
INSIDE_ID = 65534  # what the job sees: `nobody`, as before
SUBORDINATE = (Path("/etc/subuid"), Path("/etc/subgid"))


class NoFreeIds(RuntimeError):
    """Too few ids of the range are free for this server's job slots; the message says why."""


def _delegated(path: Path) -> list[tuple[int, int]]:
    """The [start, end) ranges that /etc/subuid or /etc/subgid hand to users."""
    ranges = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.strip().split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                start = int(parts[1])
                ranges.append((start, start + int(parts[2])))
    return ranges


def _taken(uid: int, delegated: list[tuple[int, int]]) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return any(start <= uid < end for start, end in delegated)


class JobIds:
    """The ids of one server's job slots: `take` one for a job, `give_back` it when every process
    of the job has ended (and its files are gone)."""

    def __init__(self, ids: list[int], locks: list[int]) -> None:
        self._free = list(reversed(ids))  # `take` pops from the end: the lowest id first
        self._count = len(ids)
        self._locks = locks  # held open for the server's lifetime

    @classmethod
    def claim(
        cls,
        directory: Path,
        base: int,
        count: int,
        size: int = RANGE_SIZE,
        subordinate: tuple[Path, ...] = SUBORDINATE,
    ) -> "JobIds":
        """Lock `count` free ids of [base, base + size), the lowest first, none of them one that
        the `subordinate` files (/etc/subuid, /etc/subgid) delegate. Rootless, `size` is how many
        ids the server's user namespace maps and `subordinate` is empty: those files then name
        host ids, not the namespace's, and the namespace's ids are the server's own to give."""
        if not 0 < base <= 2**31 - RANGE_SIZE:
            raise NoFreeIds(f"the job uid base {base} must be between 1 and {2**31 - RANGE_SIZE}")
        directory.mkdir(mode=0o700, exist_ok=True)
        delegated = [interval for path in subordinate for interval in _delegated(path)]
        ids: list[int] = []
        locks: list[int] = []
        for uid in range(base, base + size):
            if len(ids) == count:
                break
            if _taken(uid, delegated):
                continue
            fd = os.open(directory / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # another server on this host runs its jobs as this id
                continue
            ids.append(uid)
            locks.append(fd)
        if len(ids) < count:
            for fd in locks:
                os.close(fd)
            raise NoFreeIds(
                f"only {len(ids)} of the {count} job uids needed are free in "
                f"{base}-{base + size - 1} (other servers on this host hold them, or the "
                "user database or /etc/subuid uses them): set jail_uid_base"
            )
        return cls(ids, locks)

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def taken(self) -> int:
        """Ids taken and not given back: jobs running or being taken down."""
        return self._count - len(self._free)

    def take(self) -> int:
        if not self._free:  # the service never runs more jobs than it has slots
            raise RuntimeError("no free job uid: more jobs at once than job slots")
        return self._free.pop()

    def give_back(self, uid: int) -> None:
        self._free.append(uid)

    def release(self) -> None:
        """Let other servers use the ids (when this one stops)."""
        for fd in self._locks:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._locks = []
