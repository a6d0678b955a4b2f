"""Large import files written straight to disk, for tests that measure a whole import.

The shape is benchmarks/netscape_gen.py's in small: folders of every size (one holds a quarter of
the file), tags, descriptions, non-ASCII titles; and what an import reports line by line:
entries without a date and pages that come twice. Deterministic: the same count gives the same file.
"""

import html
import json
import time
from collections.abc import Iterator
from pathlib import Path

WORDS = ["python", "café", "Zürich", "東京", "kernel", "recipe", "Ελλάδα", "news", "data"]


def _entries(count: int) -> Iterator[dict]:
    for number in range(count):
        word = WORDS[number % len(WORDS)]
        entry = {
            # Every 50th entry repeats an earlier page: merged, and listed with --verbose.
            "url": f"https://{word.encode('ascii', 'ignore').decode() or 'site'}"
            f"{number % 997}.example.org/{number - number % 50 if number % 50 == 49 else number}",
            "title": f"{word.title()} {WORDS[number * 7 % len(WORDS)]} {number}",
            "tags": [WORDS[number * 3 % len(WORDS)]] if number % 5 == 0 else [],
            "description": " ".join(WORDS) if number % 7 == 0 else "",
            # Every 20th entry has no date: imported with the import time, and listed.
            "added": None if number % 20 == 0 else 1_300_000_000 + number * 37,
        }
        yield entry


def write_html(path: Path, count: int) -> Path:
    """A Netscape file: a quarter of it in one folder, the rest in folders of 1 to 60."""
    with path.open("w", encoding="utf-8") as out:
        out.write('<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<META HTTP-EQUIV="Content-Type" ')
        out.write('CONTENT="text/html; charset=UTF-8">\n<H1>Bookmarks</H1>\n<DL><p>\n')
        folder_end = count // 4
        folder = 0
        out.write("<DT><H3>Everything</H3>\n<DL><p>\n")
        for number, entry in enumerate(_entries(count)):
            if number == folder_end:
                out.write("</DL><p>\n")
                folder += 1
                folder_end = number + 1 + folder % 60
                out.write(f"<DT><H3>{WORDS[folder % len(WORDS)]} {folder % 300}</H3>\n<DL><p>\n")
            attributes = f'HREF="{html.escape(entry["url"])}"'
            if entry["added"] is not None:
                attributes += f' ADD_DATE="{entry["added"]}"'
            if entry["tags"]:
                attributes += f' TAGS="{html.escape(",".join(entry["tags"]))}"'
            out.write(f"    <DT><A {attributes}>{html.escape(entry['title'])}</A>\n")
            if entry["description"]:
                out.write(f"    <DD>{html.escape(entry['description'])}\n")
        out.write("</DL><p>\n</DL><p>\n")
    return path


def write_json(path: Path, count: int) -> Path:
    """An array as `marks export json` writes it: one item per line."""
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for number, entry in enumerate(_entries(count)):
            added = entry.pop("added")
            if added is not None:
                entry["added"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(added))
            out.write(("\n" if number == 0 else ",\n") + json.dumps(entry, ensure_ascii=False))
        out.write("\n]\n")
    return path
