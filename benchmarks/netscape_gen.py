"""A generator of realistic Netscape bookmark files (for benchmarks and the crash test).

Folders nest up to four deep and vary from tiny to huge (one folder holds a quarter of everything,
the shape that turns naive importers quadratic); titles and descriptions are multilingual;
domains repeat like real libraries; some entries are duplicates or bookmarklets.
"""

import html
import random

WORDS = [
    "python",
    "rust",
    "guide",
    "tutorial",
    "release",
    "notes",
    "café",
    "Zürich",
    "東京",
    "recipe",
    "design",
    "pattern",
    "data",
    "science",
    "machine",
    "learning",
    "news",
    "weather",
    "music",
    "video",
    "podcast",
    "research",
    "paper",
    "survey",
    "kubernetes",
    "docker",
    "linux",
    "kernel",
    "browser",
    "privacy",
    "security",
    "budget",
    "travel",
    "Ελλάδα",
]


def generate(count: int, seed: int = 1, domains: int = 2000) -> str:
    rng = random.Random(seed)
    hosts = [
        f"{rng.choice(WORDS).encode('ascii', 'ignore').decode() or 'site'}{n}.example.org"
        for n in range(domains)
    ]
    lines = [
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>",
        '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">',
        "<TITLE>Bookmarks</TITLE>",
        "<H1>Bookmarks</H1>",
        "<DL><p>",
        '    <DT><H3 PERSONAL_TOOLBAR_FOLDER="true">Bookmarks bar</H3>',
        "    <DL><p>",
    ]
    written = 0
    folder = 0

    def entry(indent: str) -> str:
        nonlocal written
        written += 1
        host = hosts[int(rng.paretovariate(1.2)) % len(hosts)]
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7))).capitalize()
        added = 1_300_000_000 + rng.randint(0, 400_000_000)
        visit = f' LAST_VISIT="{added + rng.randint(0, 9_000_000)}"' if rng.random() < 0.3 else ""
        tags = f' TAGS="{rng.choice(WORDS)},{rng.choice(WORDS)}"' if rng.random() < 0.2 else ""
        line = (
            f'{indent}<DT><A HREF="https://{host}/{written}/{rng.choice(WORDS)}" '
            f'ADD_DATE="{added}"{visit}{tags}>{html.escape(title)}</A>'
        )
        if rng.random() < 0.15:
            line += f"\n{indent}<DD>{html.escape(' '.join(rng.choices(WORDS, k=12)))}"
        return line

    big = count // 4
    lines.append("        <DT><H3>Everything</H3>")
    lines.append("        <DL><p>")
    lines += [entry("            ") for _ in range(big)]
    lines.append("        </DL><p>")
    while written < count:
        folder += 1
        depth = rng.randint(1, 4)
        for level in range(depth):
            pad = "    " * (2 + level)
            lines += [
                f"{pad}<DT><H3>{rng.choice(WORDS).title()} {folder}-{level}</H3>",
                f"{pad}<DL><p>",
            ]
        size = min(count - written, int(rng.paretovariate(1.5) * 8))
        lines += [entry("    " * (2 + depth)) for _ in range(size)]
        for level in reversed(range(depth)):
            lines.append(f"{'    ' * (2 + level)}</DL><p>")
    lines += ["    </DL><p>", "</DL><p>"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
