"""Where one server instance keeps what its jails must reach, apart from its state dir.

nsjail's bind mounts are made by the jailed user (the job's uid on the host, see ids.py), so every
directory above a bind source must be searchable by that user, and `/proc/self/mountinfo` in the
jail shows each bind source's path on its host filesystem. The state dir is the operator's choice
(`/root/...`, a `mktemp -d`) and may sit below a 0700 parent; its path is nobody's business inside
a job. So the environments, the per-job work-dir mount points and /proc files live below
`JAIL_ROOT/<instance>`, a tree jobrunner creates with modes the jail user can traverse (0711:
searchable, not listable), whose path names nothing of the host. The instance id is derived from
the state dir's real path, so a restart of the same server finds (and reaps) what it left, and
never touches another instance's.

Rootless (see privilege.py) there is no writable /var/lib to use: the tree is `<state dir>/jail`
(the service makes the state dir 0711, so the jobs' subordinate ids may traverse it), and the
state dir's path shows in the jail's mountinfo.
"""

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from jobrunner.sandbox import privilege

JAIL_ROOT = Path("/var/lib/jobrunner-jail")


def instance_id(state: Path) -> str:
    return hashlib.sha256(os.fsencode(state.resolve())).hexdigest()[:16]


@dataclass(frozen=True)
class Layout:
    instance: str
    root: Path

    @classmethod
    def for_state(cls, state: Path, jail_root: Path | None = None) -> "Layout":
        """The layout of the server whose state dir is `state`: below `jail_root`, by default
        JAIL_ROOT for root on the host and `<state>/jail` otherwise (rootless)."""
        if jail_root is None:
            jail_root = JAIL_ROOT if privilege.host_root() else state / "jail"
        instance = instance_id(state)
        return cls(instance, jail_root / instance)

    @functools.cached_property  # asked for several times by every job
    def envs(self) -> Path:
        return self.root / "envs"

    @functools.cached_property
    def work(self) -> Path:
        """Holds one tmpfs mount point per running job."""
        return self.root / "work"

    @functools.cached_property
    def proc(self) -> Path:
        """Holds one directory per running job: the files that cover the host's /proc files, and
        nsjail's log of the job."""
        return self.root / "proc"

    @functools.cached_property
    def scratch(self) -> tuple[Path, Path]:
        """The directories that hold what comes and goes with every job: each is a tmpfs of the
        sandbox's own while it runs (`workdir.mount_scratch`)."""
        return self.work, self.proc

    @functools.cached_property
    def staging(self) -> Path:
        """A tmpfs of the server's own (0700) holding each queued job's unpacked upload until
        the job runs: see `workdir.mount_staging`."""
        return self.root / "staging"

    @functools.cached_property
    def proc_shared(self) -> Path:
        """The files that cover the host's /proc files alike for every job (written at start)."""
        return self.root / "proc-shared"

    @functools.cached_property
    def ids(self) -> Path:
        """The host-wide locks of the job uids (one file per id), shared by every instance."""
        return self.root.parent / "ids"

    def prepare(self) -> None:
        for directory in (self.root.parent, self.root, self.work, self.proc, self.staging):
            directory.mkdir(mode=0o711, parents=True, exist_ok=True)
            os.chown(directory, 0, 0)
            directory.chmod(0o711)  # the jail user may pass through, nobody may list
