"""File paths as text, written as `pathlib` writes them, for the modules every command loads.

`pathlib` imports `urllib.parse` (with `ipaddress`) and `fnmatch`: about 17 million instructions,
6% of a short command, for a few joins and one check. The configuration, the library file and the
plugin index are named here as `str(Path(...))` would name them (`//` and `.` parts dropped, no
trailing `/`), so messages and files stay the same. Elsewhere than POSIX, pathlib itself does it.
"""

import errno
import os
import stat


def _posix(path: str) -> tuple[str, list[str]]:
    # PurePosixPath's reading: exactly two leading slashes stay (POSIX leaves them to the
    # system), any other number is one root; empty and `.` parts go, `..` stays.
    root = "//" if path[:2] == "//" and path[2:3] != "/" else "/" if path[:1] == "/" else ""
    return root, [part for part in path.split("/") if part and part != "."]


def tidy(path: "str | os.PathLike[str]") -> str:
    """`str(Path(path))`."""
    text = os.fspath(path)
    if os.sep != "/":
        from pathlib import Path

        return str(Path(text))
    root, parts = _posix(text)
    return root + "/".join(parts) if root or parts else "."


def parent(path: "str | os.PathLike[str]") -> str:
    """`str(Path(path).parent)`."""
    text = os.fspath(path)
    if os.sep != "/":
        from pathlib import Path

        return str(Path(text).parent)
    root, parts = _posix(text)
    return root + "/".join(parts[:-1]) if root or parts[:-1] else "."


def is_dir(path: str) -> bool:
    """`Path(path).is_dir()`: False when it is missing (or a loop of links); other errors, a
    permission refused among them, are raised."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise
    except ValueError:  # a NUL in the name
        return False
