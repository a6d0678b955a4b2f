"""Markdown export: one list per top-level tag, then the untagged, as links people can read."""

from collections.abc import Iterable
from typing import TextIO

from marks.wire import Bookmark


def _escape(text: str) -> str:
    for char in "\\[]()*_`":
        text = text.replace(char, "\\" + char)
    return text


def write(bookmarks: Iterable[Bookmark], out: TextIO) -> int:
    groups: dict[str, list[Bookmark]] = {}
    count = 0
    for bookmark in bookmarks:
        group = bookmark.tags[0].split("/")[0] if bookmark.tags else ""
        groups.setdefault(group, []).append(bookmark)
        count += 1
    out.write("# Bookmarks\n")
    for group in sorted(groups, key=lambda name: (name == "", name.casefold())):
        out.write(f"\n## {_escape(group) if group else 'Untagged'}\n\n")
        for b in groups[group]:
            line = f"- [{_escape(b.title or b.url)}](<{b.url.replace('>', '%3E')}>)"
            if b.tags:
                line += " " + " ".join(f"`#{tag}`" for tag in b.tags)
            if b.description:
                line += f" — {_escape(' '.join(b.description.split()))}"
            out.write(line + "\n")
    return count
