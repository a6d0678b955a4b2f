"""Relative paths that stay inside their directory: one rule for manifests and uploads."""


class UnsafePath(ValueError):
    """The path could leave its directory; the message says how."""


def normalise(path: str) -> str:
    """`a/./b//c` -> `a/b/c`. Refuses NUL, absolute paths and `..` (which could climb out)."""
    if "\x00" in path:
        raise UnsafePath("NUL in name")
    if path.startswith("/"):
        raise UnsafePath("absolute path")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafePath("path contains '..'")
    return "/".join(parts)
