"""Markdown export: one list per top-level tag, then the untagged, as links people can read."""

import re
from collections.abc import Iterable
from typing import TextIO

from marks.wire import Bookmark


def _escape(text: str) -> str:
    # `<` and `&` too: a Markdown viewer renders raw HTML, so a title `<img onerror=...>` in the
    # export must stay text.
    for char in "\\[]()*_`<>&":
        text = text.replace(char, "\\" + char)
    return text


def _code(tag: str) -> str:
    """A tag as a code span that a backtick inside it cannot close early (CommonMark: a longer
    fence, and a space before it when the text itself ends with a backtick)."""
    fence = "`" * (max((len(run) for run in re.findall("`+", tag)), default=0) + 1)
    pad = " " if tag.endswith("`") else ""
    return f"{fence}#{tag}{pad}{fence}"


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
            url = b.url.replace("<", "%3C").replace(">", "%3E")
            line = f"- [{_escape(b.title or b.url)}](<{url}>)"
            if b.tags:
                line += " " + " ".join(_code(tag) for tag in b.tags)
            if b.description:
                line += f" — {_escape(' '.join(b.description.split()))}"
            out.write(line + "\n")
    return count
