"""Tag names: `/` makes a hierarchy; commas and line breaks separate tags, so never inside one."""

from marks.exceptions import Invalid


class InvalidTag(Invalid):
    pass


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def nocase(name: str) -> str:
    """SQLite's NOCASE order (ASCII letters folded, everything else by code point)."""
    return name.translate(_ASCII_LOWER)


def normalise(name: str) -> str:
    """` a / b ` -> `a/b`; collapses whitespace; refuses empty names and separators."""
    if "," in name or "\n" in name or "\r" in name:
        raise InvalidTag(f"a tag cannot contain a comma or a line break: {name!r}")
    segments = [" ".join(part.split()) for part in name.split("/")]
    segments = [segment for segment in segments if segment]
    if not segments:
        raise InvalidTag(f"empty tag name: {name!r}")
    return "/".join(segments)


def from_folder(folder: str) -> str:
    """A browser folder name as one tag segment (`/` would nest, `,` would split)."""
    return " ".join(folder.replace("/", "-").replace(",", ";").split())


def ancestors(name: str) -> list[str]:
    """`a/b/c` -> [`a`, `a/b`]."""
    parts = name.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def is_within(name: str, parent: str) -> bool:
    """True for the tag itself and every descendant (case-insensitive, like the table)."""
    name, parent = key(name), key(parent)
    return name == parent or name.startswith(parent + "/")


def key(name: str) -> str:
    """What makes two tag names one tag: Unicode case folding, so `Äpfel` and `äpfel` (and
    `STRASSE` and `straße`) are one tag in every script, not only ASCII as SQLite's NOCASE."""
    return name.strip().strip("/").casefold()
