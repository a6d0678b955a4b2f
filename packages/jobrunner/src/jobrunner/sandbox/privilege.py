"""Which privilege the sandbox has: root on the host, or root of a user namespace (rootless).

Rootless: an unprivileged user with a subordinate id range (/etc/subuid and /etc/subgid) starts
`jobrunner serve`; the server re-executes itself, same pid, under util-linux's `unshare`, in a user
namespace of its own (and a mount namespace that namespace owns) where:
- uid and gid 0 are the server's own user: it may mount the jobs' tmpfs work dirs, chown files to
  the job ids and start nsjail, whose jails are user namespaces nested in this one;
- ids 1..count are the user's subordinate ids (written by the setuid newuidmap/newgidmap, the
  only way an unprivileged user maps more than its own id). Each job slot gets one of them, so on
  the host a job is never the server's user and cannot read its files (state dir, worker.key).
Without a subordinate range every job would have to be the server's own uid: the server refuses
to start instead.

A container's root (podman --userns=auto, rootless podman) is root of a user namespace already,
but without CAP_SYS_ADMIN (runtimes drop it), so it could not mount the work dirs: it enters a
namespace of its own the same way (the image's /etc/subuid gives root the container's ids 1..N).
"""

import os
import pwd
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

MAX_IDS = 65536  # the job slots draw from at most this many subordinate ids
_FULL = (0, 0, 2**32 - 1)  # the initial user namespace's identity map


class RootlessUnavailable(RuntimeError):
    """This user cannot run the sandbox rootless; the message says what is missing."""


@dataclass(frozen=True)
class IdMap:
    """One line of /proc/self/uid_map or gid_map: `count` ids from `inside` are `outside`."""

    inside: int
    outside: int
    count: int


@dataclass(frozen=True)
class Namespace:
    """The user namespace the server is root of (rootless mode)."""

    uids: list[IdMap]
    gids: list[IdMap]

    @property
    def owner(self) -> int:
        """The host uid of the server (its namespace's 0)."""
        return next((m.outside for m in self.uids if m.inside == 0), -1)

    def job_range(self) -> tuple[int, int]:
        """(first, count) of the namespace's ids usable for jobs: those mapped, from 1 on, as
        uids and as gids alike, none of them the server's own host id."""
        first = 1
        count = min(_mapped_from(self.uids, first), _mapped_from(self.gids, first))
        return first, min(count, MAX_IDS)


def _mapped_from(maps: list[IdMap], first: int) -> int:
    """How many consecutive ids from `first` the maps hold."""
    count = 0
    while True:
        here = first + count
        block = next((m for m in maps if m.inside <= here < m.inside + m.count), None)
        if block is None:
            return count
        count += block.inside + block.count - here


def _read_map(path: Path) -> list[IdMap]:
    result = []
    for line in path.read_text().splitlines():
        inside, outside, count = (int(field) for field in line.split())
        result.append(IdMap(inside, outside, count))
    return result


def user_namespace() -> Namespace | None:
    """The user namespace this process is root of, or None on the host (or not root)."""
    if os.geteuid() != 0:
        return None
    uids = _read_map(Path("/proc/self/uid_map"))
    if [(m.inside, m.outside, m.count) for m in uids] == [_FULL]:
        return None
    return Namespace(uids, _read_map(Path("/proc/self/gid_map")))


def host_root() -> bool:
    return os.geteuid() == 0 and user_namespace() is None


def _has_sys_admin() -> bool:
    """Whether CAP_SYS_ADMIN (21) is effective (in this process's own user namespace)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 21 & 1)
    return False


def needs_own_namespace() -> bool:
    """Whether the sandbox must first enter a user namespace of its own: unprivileged, or root
    of a namespace without CAP_SYS_ADMIN in it (a container's). Once entered, it has it."""
    return os.geteuid() != 0 or not _has_sys_admin()


def subordinate(path: Path, user: str, uid: int) -> tuple[int, int] | None:
    """(start, count) of the user's first range in /etc/subuid or /etc/subgid (by name or uid)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.strip().partition(":")
        start, _, count = rest.partition(":")
        if name in (user, str(uid)) and start.isdigit() and count.isdigit() and int(count) > 0:
            return int(start), int(count)
    return None


def enter_user_namespace() -> NoReturn:
    """Re-execute this process (same pid, same argv) as root of a user and mount namespace of
    its own, with the user's subordinate ids mapped from 1 on. Raises RootlessUnavailable,
    naming what is missing, when that cannot work."""
    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    subuid = subordinate(Path("/etc/subuid"), user, uid)
    subgid = subordinate(Path("/etc/subgid"), user, uid)
    if subuid is None or subgid is None:
        raise RootlessUnavailable(
            f"rootless mode needs a subordinate uid and gid range for user {user} in /etc/subuid "
            f"and /etc/subgid (e.g. `usermod --add-subuids 300000-365535 --add-subgids "
            f"300000-365535 {user}`): without one every job would run as this server's own uid"
        )
    tools = {name: shutil.which(name) for name in ("unshare", "newuidmap", "newgidmap")}
    if missing := [name for name, path in tools.items() if path is None]:
        raise RootlessUnavailable(
            f"rootless mode needs {', '.join(missing)} (Debian: util-linux, uidmap)"
        )
    unshare = str(tools["unshare"])
    uids, gids = (min(count, MAX_IDS) for _start, count in (subuid, subgid))
    argv = [
        unshare,
        "--user",
        "--mount",  # owned by the new user namespace: the jobs' tmpfs mounts are allowed there
        "--map-root-user",
        # util-linux 2.38's order: outer, inner, count (newuidmap/newgidmap write them)
        f"--map-users={subuid[0]},1,{uids}",
        f"--map-groups={subgid[0]},1,{gids}",
        "--",
        sys.executable,
        *sys.orig_argv[1:],
    ]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(unshare, argv)  # noqa: S606 -- an argv list of fixed tools, no shell
