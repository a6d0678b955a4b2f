"""What a job's outputs cost in its answers, and the listing `GET /outputs` gives.

`/status` names every output twice (its key and its `path`); `/outputs` names it, its file name in
its directory's entry, and every directory above it. Names are charged as JSON writes them, where a
control character takes six bytes (`\\u0001`): 1,000 outputs under 3.7 KB paths of such characters
made a 45 MB record, and 700 chains of 14 such directories a 127 MB listing, each encoded afresh
for every request while the event loop waited (behind a pool the worker was declared lost). So the
names a job lists may cost at most `LISTING_BYTES`; outputs past that (in path order) stay on disk
and are not listed, and the answers stay within about that size.
"""

from collections.abc import Iterable

import msgspec

from jobrunner.wire import DirectoryEntry, FileEntry

LISTING_BYTES = 2 * 2**20
# The rest of an output's entries around its names (size, hash, type, keys, punctuation), and of a
# directory's entry around its path: generous, so that the bound holds for the whole answer.
_FILE_FIELDS = 192
_DIRECTORY_FIELDS = 48


def _json_size(text: str) -> int:
    return len(msgspec.json.encode(text))


class ListingBudget:
    """Admits outputs, in path order, while the names they add to the job's answers fit."""

    def __init__(self, limit: int = LISTING_BYTES) -> None:
        self.left = limit
        self._directories: set[str] = set()

    def admit(self, path: str) -> bool:
        """Charge `path` and the directories above it that no admitted output has charged yet;
        False (nothing charged) if that is more than is left."""
        parent, _, name = path.rpartition("/")
        new = []
        while parent and parent not in self._directories:
            new.append(parent)
            parent = parent.rpartition("/")[0]
        cost = 3 * _json_size(path) + _json_size(name) + _FILE_FIELDS
        cost += sum(_json_size(directory + "/") + _DIRECTORY_FIELDS for directory in new)
        if cost > self.left:
            return False
        self.left -= cost
        self._directories.update(new)
        return True


def listing(files: Iterable[tuple[str, int]]) -> list[FileEntry | DirectoryEntry]:
    """`GET /outputs`: each file (path, size), and each directory above one with the names of the
    files directly in it (a directory that holds only directories is listed with none)."""
    entries: list[FileEntry | DirectoryEntry] = []
    directories: dict[str, list[str]] = {}
    for path, size in sorted(files):
        entries.append(FileEntry(path, size))
        parent, _, name = path.rpartition("/")
        if parent:
            directories.setdefault(parent + "/", []).append(name)
            while "/" in parent:
                parent = parent.rpartition("/")[0]
                directories.setdefault(parent + "/", [])
    entries += [DirectoryEntry(path, names) for path, names in directories.items()]
    entries.sort(key=lambda entry: entry.path)
    return entries
