"""Generated browser profiles of any size (benchmarks and the demo): a Chromium profile
(`Bookmarks` JSON and `History`) and a Firefox profile (`places.sqlite`), with folders, tags and a
history that covers the bookmarks and as many pages again."""

import datetime as dt
import json
import random
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.browserfiles import (
    CHROMIUM_HISTORY_SCHEMA,
    FIREFOX_SCHEMA,
    ROOTS,
    TOOLBAR,
    chromium_time,
    firefox_time,
)

TOPICS = ["dev", "news", "food", "travel", "music", "science", "work", "home", "games", "books"]
SUBTOPICS = ["python", "rust", "linux", "recipes", "europe", "jazz", "papers", "tools", "misc"]


def _pages(count: int, history: int, seed: int):
    rng = random.Random(seed)
    base = dt.datetime(2015, 1, 1, tzinfo=dt.UTC)
    for n in range(max(count, history)):
        site = int(rng.paretovariate(1.2)) % 3000  # a few big sites, a long tail of small ones
        host = (
            f"{rng.choice(('www', 'docs', 'blog'))}.{SUBTOPICS[site % len(SUBTOPICS)]}{site}.test"
        )
        when = base + dt.timedelta(seconds=rng.randint(0, 300_000_000))
        folder = (rng.choice(TOPICS), rng.choice(SUBTOPICS))
        yield n, f"https://{host}/{n}/page", f"Page {n} about {folder[1]}", when, folder, rng


def chrome_profile(profile: Path, count: int, history: int, seed: int = 1) -> None:
    profile.mkdir(parents=True, exist_ok=True)
    folders: dict[tuple[str, str], list] = {}
    db = sqlite3.connect(profile / "History", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(CHROMIUM_HISTORY_SCHEMA)
    db.execute("BEGIN")
    rows, visits = [], []
    for n, url, title, when, folder, rng in _pages(count, history, seed):
        if n < count:
            folders.setdefault(folder, []).append(
                {
                    "date_added": str(chromium_time(when)),
                    "id": str(n + 10),
                    "name": title,
                    "type": "url",
                    "url": url,
                }
            )
        if n < history:
            times = rng.randint(1, 5)
            rows.append((n + 1, url, title, times, chromium_time(when)))
            visits.extend((n + 1, chromium_time(when)) for _ in range(times))
    db.executemany(
        "INSERT INTO urls (id, url, title, visit_count, last_visit_time) VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    db.executemany("INSERT INTO visits (url, visit_time) VALUES (?, ?)", visits)
    db.execute("COMMIT")
    db.close()
    tree: dict[str, dict] = {}
    for (top, sub), children in folders.items():
        parent = tree.setdefault(top, {"type": "folder", "name": top.title(), "children": []})
        parent["children"].append({"type": "folder", "name": sub, "children": children})
    data = {
        "roots": {
            "bookmark_bar": {
                "type": "folder",
                "name": "Bookmarks bar",
                "children": list(tree.values()),
            },
            "other": {"type": "folder", "name": "Other bookmarks", "children": []},
            "synced": {"type": "folder", "name": "Mobile bookmarks", "children": []},
        },
        "version": 1,
    }
    (profile / "Bookmarks").write_text(json.dumps(data))


def firefox_profile(profile: Path, count: int, history: int, seed: int = 2) -> None:
    profile.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(profile / "places.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(FIREFOX_SCHEMA)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO moz_bookmarks (id, type, parent, position, title, dateAdded, guid) "
        "VALUES (?, 2, ?, 0, ?, 0, ?)",
        ROOTS,
    )
    folder_ids: dict[tuple[str, str], int] = {}
    tag_ids: dict[str, int] = {}
    next_id = [1000]

    def new_id() -> int:
        next_id[0] += 1
        return next_id[0]

    places, marks, visits = [], [], []
    for n, url, title, when, folder, rng in _pages(count, history, seed):
        place = n + 1
        times = rng.randint(1, 5) if n < history else 0
        places.append(
            (place, url, title, times, firefox_time(when) if times else None, f"p{n:011d}")
        )
        visits.extend((place, firefox_time(when)) for _ in range(times))
        if n < count:
            if folder not in folder_ids:
                top = folder_ids.get((folder[0], ""))
                if top is None:
                    top = folder_ids[(folder[0], "")] = new_id()
                    marks.append((top, 2, None, TOOLBAR, folder[0].title(), 0, f"f{top:011d}"))
                folder_ids[folder] = new_id()
                marks.append(
                    (folder_ids[folder], 2, None, top, folder[1], 0, f"f{next_id[0]:011d}")
                )
            ident = new_id()
            marks.append(
                (ident, 1, place, folder_ids[folder], title, firefox_time(when), f"b{ident:011d}")
            )
            if n % 3 == 0:
                tag = rng.choice(SUBTOPICS)
                if tag not in tag_ids:
                    tag_ids[tag] = new_id()
                    marks.append((tag_ids[tag], 2, None, 4, tag, 0, f"t{tag_ids[tag]:011d}"))
                ident = new_id()
                marks.append((ident, 1, place, tag_ids[tag], None, 0, f"b{ident:011d}"))
    db.executemany(
        "INSERT INTO moz_places (id, url, title, visit_count, last_visit_date, guid) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        places,
    )
    db.executemany(
        "INSERT INTO moz_bookmarks (id, type, fk, parent, title, dateAdded, guid) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        marks,
    )
    db.executemany(
        "INSERT INTO moz_historyvisits (place_id, visit_date, visit_type) VALUES (?, ?, 1)", visits
    )
    db.execute("COMMIT")
    db.close()
