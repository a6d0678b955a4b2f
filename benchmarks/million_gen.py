"""A lifetime of bookmarks and browser history as one Netscape bookmark file, of any size.

The shape of a browser's export after years of use: a bookmarks bar and an "Other bookmarks"
folder holding nested folders (up to five deep, from a handful of links to tens of thousands),
tags on a fifth of the entries from a vocabulary of a few thousand (hierarchical ones like
`dev/python` among them), domains that repeat by a power law (a few sites hold most pages), and a
history: every entry has ADD_DATE, about a third were visited (LAST_VISIT after the addition,
VISIT_COUNT long-tailed: most once, a few thousands of times). Titles are multilingual. As in a
library marks exported itself, a few are starred (2%), archived (1%), found broken (0.5%); 1% are
PDFs.

Deterministic for a seed, written streaming (the file is never whole in memory), and cached: the
file for a (count, seed) is written once under the cache directory and reused by later runs.
"""

import html
import os
import random
import tempfile
from pathlib import Path

from netscape_gen import WORDS

VERSION = 2  # bump when the shape changes, so a cached file of the old shape is not reused
TOPICS = ["dev", "news", "food", "travel", "music", "science", "work", "home", "games", "books"]


def cache_dir() -> Path:
    base = os.environ.get("MARKS_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or tempfile.gettempdir(), "marks-bench"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(count: int, seed: int = 1) -> Path:
    """The generated file for (count, seed), written on first use (atomically: a run interrupted
    halfway leaves no truncated file to reuse)."""
    path = cache_dir() / f"million-v{VERSION}-{count}-{seed}.html"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with partial.open("w", encoding="utf-8") as out:
            write(out, count, seed)
        partial.replace(path)
    return path


def write(out, count: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    domains = max(50, count // 40)
    hosts = [f"{rng.choice(TOPICS)}{n}.example.org" for n in range(domains)]
    ascii_words = [word.encode("ascii", "ignore").decode() or "word" for word in WORDS]
    tags = [f"{rng.choice(TOPICS)}/{rng.choice(ascii_words)}{n}" for n in range(700)]
    tags += [f"{rng.choice(ascii_words)}{n}" for n in range(700, 3000)]
    start = 1_200_000_000  # 2008: a lifetime of bookmarks
    span = 580_000_000  # to 2026
    written = 0

    def entry(pad: str) -> str:
        nonlocal written
        written += 1
        host = hosts[int((rng.paretovariate(1.0) - 1) * 10) % domains]  # the top site: ~9%
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))).capitalize()
        added = start + rng.randrange(span)
        page = f"{written}/{rng.choice(WORDS)}" + (".pdf" if rng.random() < 0.01 else "")
        attributes = [f'HREF="https://{host}/{page}"', f'ADD_DATE="{added}"']
        if rng.random() < 0.35:  # visited: when, and how often (most once, a few very often)
            visit = added + int(rng.expovariate(1 / 30_000_000))
            attributes.append(f'LAST_VISIT="{min(visit, start + span)}"')
            attributes.append(f'VISIT_COUNT="{int(rng.paretovariate(1.2))}"')
        if rng.random() < 0.2:
            chosen = {rng.choice(tags) for _ in range(rng.randint(1, 4))}
            attributes.append(f'TAGS="{html.escape(",".join(sorted(chosen)))}"')
        # What marks itself writes (a library exported and imported again): some starred,
        # archived, and links found broken.
        if rng.random() < 0.02:
            attributes.append('STARRED="1"')
        if rng.random() < 0.01:
            attributes.append('ARCHIVED="1"')
        if rng.random() < 0.005:
            attributes.append(f'REACHABLE="0" LAST_CHECKED="{start + span}"')
        line = f"{pad}<DT><A {' '.join(attributes)}>{html.escape(title)}</A>\n"
        if rng.random() < 0.1:
            line += f"{pad}<DD>{html.escape(' '.join(rng.choices(WORDS, k=12)))}\n"
        return line

    out.write(
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n"
        '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">\n'
        "<TITLE>Bookmarks</TITLE>\n<H1>Bookmarks</H1>\n<DL><p>\n"
        '    <DT><H3 PERSONAL_TOOLBAR_FOLDER="true">Bookmarks bar</H3>\n    <DL><p>\n'
    )
    for _ in range(min(count, 40)):  # a short bar of favourites
        out.write(entry("        "))
    out.write("    </DL><p>\n    <DT><H3>Other bookmarks</H3>\n    <DL><p>\n")
    folder = 0

    def fill(depth: int, remaining: int) -> None:
        """Folders under the current one until `remaining` entries are written."""
        nonlocal folder
        pad = "    " * (depth + 2)
        while remaining > 0:
            folder += 1
            size = min(remaining, max(1, int(rng.paretovariate(0.9) * 6)))
            remaining -= size
            out.write(f"{pad}<DT><H3>{rng.choice(TOPICS).title()} {folder}</H3>\n{pad}<DL><p>\n")
            if depth < 4 and size > 40 and rng.random() < 0.5:
                here = size // 3
                for _ in range(here):
                    out.write(entry(pad + "    "))
                fill(depth + 1, size - here)
            else:
                for _ in range(size):
                    out.write(entry(pad + "    "))
            out.write(f"{pad}</DL><p>\n")

    fill(1, count - written)
    out.write("    </DL><p>\n</DL><p>\n")


if __name__ == "__main__":
    import sys

    write(sys.stdout, int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
