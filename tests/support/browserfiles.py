"""Real browser profile files, written by test code (never copied from anywhere).

Formats as documented by the browsers' own sources and docs and checked against the samples in
`shared/reference/browser-formats/`: Chromium's `Bookmarks` JSON (`roots`, `children`,
`date_added` in microseconds since 1601 as a string) and `History` (`urls`, `visits`, `meta`),
Firefox's `places.sqlite` (`moz_places`, `moz_bookmarks`, `moz_historyvisits`, `moz_origins`;
tags are folders under the tags root holding one bookmark row per tagged place), and Safari's
`Bookmarks.plist` (`WebBookmarkTypeList`/`Leaf`, written with plistlib) and `History.db`
(`history_items`, `history_visits`, `visit_time` in seconds since 2001).
"""

import datetime as dt
import json
import plistlib
import sqlite3
from pathlib import Path

UTC = dt.UTC
CHROMIUM_EPOCH = dt.datetime(1601, 1, 1, tzinfo=UTC)
SAFARI_EPOCH = dt.datetime(2001, 1, 1, tzinfo=UTC)


def chromium_time(moment: dt.datetime) -> int:
    return int((moment - CHROMIUM_EPOCH).total_seconds()) * 1_000_000


def firefox_time(moment: dt.datetime) -> int:
    return int(moment.timestamp()) * 1_000_000


def safari_time(moment: dt.datetime) -> float:
    return (moment - SAFARI_EPOCH).total_seconds()


# --- Chromium family ----------------------------------------------------------------------------


def chromium_url(name: str, url: str, added: dt.datetime, ident: int = 0) -> dict:
    return {
        "date_added": str(chromium_time(added)),
        "date_last_used": "0",
        "guid": f"00000000-0000-4000-8000-{ident:012d}",
        "id": str(ident),
        "name": name,
        "type": "url",
        "url": url,
    }


def chromium_folder(name: str, children: list, ident: int = 0) -> dict:
    return {
        "children": children,
        "date_added": "13300000000000000",
        "date_modified": "0",
        "guid": f"10000000-0000-4000-8000-{ident:012d}",
        "id": str(ident),
        "name": name,
        "type": "folder",
    }


def write_chromium_bookmarks(
    profile: Path, bar: list, other: list = (), synced: list = (), version: int = 1
) -> Path:
    profile.mkdir(parents=True, exist_ok=True)
    data = {
        "checksum": "0" * 32,
        "roots": {
            "bookmark_bar": chromium_folder("Bookmarks bar", list(bar), 1),
            "other": chromium_folder("Other bookmarks", list(other), 2),
            "synced": chromium_folder("Mobile bookmarks", list(synced), 3),
        },
        "version": version,
    }
    path = profile / "Bookmarks"
    path.write_text(json.dumps(data, indent=3))
    return path


def write_local_state(user_data: Path, names: dict[str, str], last_used: str = "Default") -> None:
    user_data.mkdir(parents=True, exist_ok=True)
    state = {
        "profile": {
            "info_cache": {
                d: {"name": n, "is_using_default_name": False} for d, n in names.items()
            },
            "last_used": last_used,
            "profiles_order": list(names),
        }
    }
    (user_data / "Local State").write_text(json.dumps(state))


CHROMIUM_HISTORY_SCHEMA = """
CREATE TABLE meta (key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
CREATE TABLE urls (id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR, title LONGVARCHAR,
    visit_count INTEGER DEFAULT 0 NOT NULL, typed_count INTEGER DEFAULT 0 NOT NULL,
    last_visit_time INTEGER NOT NULL, hidden INTEGER DEFAULT 0 NOT NULL);
CREATE TABLE visits (id INTEGER PRIMARY KEY AUTOINCREMENT, url INTEGER NOT NULL,
    visit_time INTEGER NOT NULL, from_visit INTEGER, external_referrer_url TEXT,
    transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER,
    visit_duration INTEGER DEFAULT 0 NOT NULL, incremented_omnibox_typed_score BOOLEAN DEFAULT
    FALSE NOT NULL, opener_visit INTEGER, originator_cache_guid TEXT, originator_visit_id INTEGER,
    originator_from_visit INTEGER, originator_opener_visit INTEGER, is_known_to_sync BOOLEAN
    DEFAULT FALSE NOT NULL, consider_for_ntp_most_visited BOOLEAN DEFAULT FALSE NOT NULL,
    visited_link_id INTEGER DEFAULT 0 NOT NULL, app_id TEXT);
CREATE INDEX urls_url_index ON urls (url);
CREATE INDEX visits_url_index ON visits (url);
CREATE INDEX visits_time_index ON visits (visit_time);
INSERT INTO meta VALUES ('version', '70'), ('last_compatible_version', '16');
"""


def write_chromium_history(
    profile: Path, pages: list[tuple[str, str, list[dt.datetime]]]
) -> sqlite3.Connection:
    """`pages`: (url, title, visit times). Returns the open connection (WAL mode)."""
    profile.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(profile / "History", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(CHROMIUM_HISTORY_SCHEMA)
    add_chromium_visits(db, pages)
    return db


def add_chromium_visits(db: sqlite3.Connection, pages) -> None:
    db.execute("BEGIN")
    for url, title, moments in pages:
        cursor = db.execute(
            "INSERT INTO urls (url, title, visit_count, last_visit_time) VALUES (?, ?, ?, ?)",
            (url, title, len(moments), chromium_time(max(moments))),
        )
        db.executemany(
            "INSERT INTO visits (url, visit_time, transition) VALUES (?, ?, 805306368)",
            [(cursor.lastrowid, chromium_time(m)) for m in moments],
        )
    db.execute("COMMIT")


# --- Firefox --------------------------------------------------------------------------------------

FIREFOX_SCHEMA = """
CREATE TABLE moz_origins (id INTEGER PRIMARY KEY, prefix TEXT NOT NULL, host TEXT NOT NULL,
    frecency INTEGER NOT NULL, recalc_frecency INTEGER NOT NULL DEFAULT 0, alt_frecency INTEGER,
    recalc_alt_frecency INTEGER NOT NULL DEFAULT 0, UNIQUE (prefix, host));
CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url LONGVARCHAR, title LONGVARCHAR,
    rev_host LONGVARCHAR, visit_count INTEGER DEFAULT 0, hidden INTEGER DEFAULT 0 NOT NULL,
    typed INTEGER DEFAULT 0 NOT NULL, frecency INTEGER DEFAULT -1 NOT NULL,
    last_visit_date INTEGER, guid TEXT, foreign_count INTEGER DEFAULT 0 NOT NULL,
    url_hash INTEGER DEFAULT 0 NOT NULL, description TEXT, preview_image_url TEXT,
    site_name TEXT, origin_id INTEGER REFERENCES moz_origins(id),
    recalc_frecency INTEGER NOT NULL DEFAULT 0, alt_frecency INTEGER,
    recalc_alt_frecency INTEGER NOT NULL DEFAULT 0);
CREATE TABLE moz_historyvisits (id INTEGER PRIMARY KEY, from_visit INTEGER, place_id INTEGER,
    visit_date INTEGER, visit_type INTEGER, session INTEGER, source INTEGER DEFAULT 0 NOT NULL,
    triggeringPlaceId INTEGER);
CREATE TABLE moz_bookmarks (id INTEGER PRIMARY KEY, type INTEGER, fk INTEGER DEFAULT NULL,
    parent INTEGER, position INTEGER, title LONGVARCHAR, keyword_id INTEGER, folder_type TEXT,
    dateAdded INTEGER, lastModified INTEGER, guid TEXT, syncStatus INTEGER NOT NULL DEFAULT 0,
    syncChangeCounter INTEGER NOT NULL DEFAULT 1);
CREATE TABLE moz_keywords (id INTEGER PRIMARY KEY AUTOINCREMENT, keyword TEXT UNIQUE,
    place_id INTEGER, post_data TEXT);
CREATE INDEX moz_places_url_hashindex ON moz_places (url_hash);
CREATE UNIQUE INDEX moz_places_guid_uniqueindex ON moz_places (guid);
CREATE INDEX moz_historyvisits_placedateindex ON moz_historyvisits (place_id, visit_date);
CREATE INDEX moz_bookmarks_itemindex ON moz_bookmarks (fk, type);
CREATE INDEX moz_bookmarks_parentindex ON moz_bookmarks (parent, position);
CREATE UNIQUE INDEX moz_bookmarks_guid_uniqueindex ON moz_bookmarks (guid);
PRAGMA user_version = 77;
"""
ROOTS = [  # id, parent, title, guid: Firefox's own folders
    (1, 0, "", "root________"),
    (2, 1, "menu", "menu________"),
    (3, 1, "toolbar", "toolbar_____"),
    (4, 1, "tags", "tags________"),
    (5, 1, "unfiled", "unfiled_____"),
    (6, 1, "mobile", "mobile______"),
]
MENU, TOOLBAR, TAGS, UNFILED = 2, 3, 4, 5


class Places:
    """A places.sqlite being written as Firefox would, connection kept open (WAL mode)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.executescript(FIREFOX_SCHEMA)
        self.next_id = 100
        self.db.execute("BEGIN")
        for ident, parent, title, guid in ROOTS:
            self.db.execute(
                "INSERT INTO moz_bookmarks (id, type, parent, position, title, dateAdded, guid) "
                "VALUES (?, 2, ?, 0, ?, 1700000000000000, ?)",
                (ident, parent, title, guid),
            )
        self.db.execute("COMMIT")

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def place(self, url: str, title: str = "", visits: list[dt.datetime] = ()) -> int:
        found = self.db.execute("SELECT id FROM moz_places WHERE url = ?", (url,)).fetchone()
        if found:
            return found[0]
        ident = self._id()
        last = firefox_time(max(visits)) if visits else None
        self.db.execute(
            "INSERT INTO moz_places (id, url, title, rev_host, visit_count, last_visit_date, "
            "guid, foreign_count) VALUES (?, ?, ?, '', ?, ?, ?, 0)",
            (ident, url, title, len(visits), last, f"place{ident:07d}"),
        )
        self.db.executemany(
            "INSERT INTO moz_historyvisits (place_id, visit_date, visit_type) VALUES (?, ?, 1)",
            [(ident, firefox_time(m)) for m in visits],
        )
        return ident

    def folder(self, title: str, parent: int) -> int:
        ident = self._id()
        self.db.execute(
            "INSERT INTO moz_bookmarks (id, type, parent, position, title, dateAdded, guid) "
            "VALUES (?, 2, ?, 0, ?, 1700000000000000, ?)",
            (ident, parent, title, f"fold{ident:08d}"),
        )
        return ident

    def bookmark(
        self,
        url: str,
        title: str,
        parent: int,
        added: dt.datetime,
        tags: list[str] = (),
        visits: list[dt.datetime] = (),
    ) -> int:
        place = self.place(url, title, visits)
        ident = self._id()
        self.db.execute(
            "INSERT INTO moz_bookmarks (id, type, fk, parent, position, title, dateAdded, guid) "
            "VALUES (?, 1, ?, ?, 0, ?, ?, ?)",
            (ident, place, parent, title, firefox_time(added), f"book{ident:08d}"),
        )
        for tag in tags:  # Firefox: a folder under the tags root, one untitled row per place
            row = self.db.execute(
                "SELECT id FROM moz_bookmarks WHERE parent = ? AND title = ?", (TAGS, tag)
            ).fetchone()
            folder = row[0] if row else self.folder(tag, TAGS)
            self.db.execute(
                "INSERT INTO moz_bookmarks (id, type, fk, parent, position, title, dateAdded, "
                "guid) VALUES (?, 1, ?, ?, 0, NULL, ?, ?)",
                (self._id(), place, folder, firefox_time(added), f"tagg{self.next_id:08d}"),
            )
        self.db.execute(
            "UPDATE moz_places SET foreign_count = foreign_count + 1 WHERE id = ?", (place,)
        )
        return ident


def write_profiles_ini(base: Path, sections: dict[str, dict[str, str]]) -> None:
    base.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, entries in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k}={v}" for k, v in entries.items()]
        lines.append("")
    (base / "profiles.ini").write_text("\n".join(lines))


# --- Safari ---------------------------------------------------------------------------------------


def safari_leaf(url: str, title: str, reading: dict | None = None) -> dict:
    leaf = {
        "WebBookmarkType": "WebBookmarkTypeLeaf",
        "WebBookmarkUUID": f"UUID-{abs(hash(url))}",
        "URLString": url,
        "URIDictionary": {"title": title},
    }
    if reading is not None:
        leaf["ReadingList"] = reading
    return leaf


def safari_folder(title: str, children: list) -> dict:
    return {
        "WebBookmarkType": "WebBookmarkTypeList",
        "WebBookmarkUUID": f"UUID-{abs(hash(title))}",
        "Title": title,
        "Children": children,
    }


def write_safari_bookmarks(safari: Path, children: list, binary: bool = True) -> Path:
    safari.mkdir(parents=True, exist_ok=True)
    root = {
        "WebBookmarkFileVersion": 1,
        "WebBookmarkType": "WebBookmarkTypeList",
        "Title": "",
        "Children": [
            {"WebBookmarkType": "WebBookmarkTypeProxy", "Title": "History"},
            *children,
        ],
    }
    path = safari / "Bookmarks.plist"
    with open(path, "wb") as out:
        plistlib.dump(root, out, fmt=plistlib.FMT_BINARY if binary else plistlib.FMT_XML)
    return path


SAFARI_HISTORY_SCHEMA = """
CREATE TABLE history_items (id INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL UNIQUE,
    domain_expansion TEXT NULL, visit_count INTEGER NOT NULL, daily_visit_counts BLOB NOT NULL,
    weekly_visit_counts BLOB NULL, autocomplete_triggers BLOB NULL,
    should_recompute_derived_visit_counts INTEGER NOT NULL, visit_count_score INTEGER NOT NULL);
CREATE TABLE history_visits (id INTEGER PRIMARY KEY AUTOINCREMENT,
    history_item INTEGER NOT NULL REFERENCES history_items(id) ON DELETE CASCADE,
    visit_time REAL NOT NULL, title TEXT NULL, load_successful BOOLEAN NOT NULL DEFAULT 1,
    http_non_get BOOLEAN NOT NULL DEFAULT 0, synthesized BOOLEAN NOT NULL DEFAULT 0,
    redirect_source INTEGER NULL UNIQUE, redirect_destination INTEGER NULL UNIQUE,
    origin INTEGER NOT NULL DEFAULT 0, generation INTEGER NOT NULL DEFAULT 0,
    attributes INTEGER NOT NULL DEFAULT 0, score INTEGER NOT NULL DEFAULT 0);
CREATE INDEX history_visits__last_visit ON history_visits (history_item, visit_time);
"""


def write_safari_history(safari: Path, pages: list[tuple[str, str, list[dt.datetime]]]) -> None:
    safari.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(safari / "History.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(SAFARI_HISTORY_SCHEMA)
    db.execute("BEGIN")
    for url, title, moments in pages:
        cursor = db.execute(
            "INSERT INTO history_items (url, visit_count, daily_visit_counts, "
            "should_recompute_derived_visit_counts, visit_count_score) VALUES (?, ?, x'', 0, 0)",
            (url, len(moments)),
        )
        db.executemany(
            "INSERT INTO history_visits (history_item, visit_time, title) VALUES (?, ?, ?)",
            [(cursor.lastrowid, safari_time(m), title) for m in moments],
        )
    db.execute("COMMIT")
    db.close()


# --- sample homes (the CLI's and the server's browser tests read the same ones) ------------------

T1 = dt.datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC)
T2 = dt.datetime(2023, 8, 9, 10, 11, 12, tzinfo=UTC)
T3 = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def chrome_home(home: Path) -> Path:
    """Chrome with two profiles: Default ("Personal": 3 bookmarks and a bookmarklet in folders)
    and Profile 1 ("Work", the last used: one bookmark). Returns the user-data directory."""
    user_data = home / ".config/google-chrome"
    write_local_state(user_data, {"Default": "Personal", "Profile 1": "Work"}, "Profile 1")
    write_chromium_bookmarks(
        user_data / "Default",
        bar=[
            chromium_url("Rust Book", "https://doc.rust-lang.org/book/", T1, 5),
            chromium_folder(
                "Dev",
                [
                    chromium_folder(
                        "Python/Async",
                        [
                            chromium_url(
                                "asyncio", "https://docs.python.org/3/library/asyncio.html", T2, 7
                            )
                        ],
                        8,
                    ),
                    chromium_url("bookmarklet", "javascript:alert(1)", T2, 9),
                ],
                6,
            ),
        ],
        other=[chromium_url("Example", "https://example.com/", T3, 10)],
    )
    write_chromium_bookmarks(
        user_data / "Profile 1",
        bar=[chromium_url("Work wiki", "https://wiki.example.org/", T2, 5)],
    )
    return user_data


def firefox_profile(home: Path) -> tuple[Path, Places]:
    """A snap Firefox's default profile: 3 bookmarks (tags, nested folders), a `place:` query,
    a page only visited. Returns the profile and its open places.sqlite."""
    base = home / "snap/firefox/common/.mozilla/firefox"
    profile = base / "x1y2z3.default"
    write_profiles_ini(
        base,
        {
            "Profile0": {
                "Name": "default",
                "IsRelative": "1",
                "Path": "x1y2z3.default",
                "Default": "1",
            }
        },
    )
    places = Places(profile / "places.sqlite")
    places.db.execute("BEGIN")
    reading = places.folder("Reading", MENU)
    deep = places.folder("Deep, nested", reading)
    places.bookmark(
        "https://www.mozilla.org/",
        "Mozilla",
        TOOLBAR,
        T1,
        tags=["browsers", "oss"],
        visits=[T1, T2],
    )
    places.bookmark("https://lwn.net/", "LWN", deep, T2, tags=["news"])
    places.bookmark("https://unfiled.example/", "Unfiled", UNFILED, T3)
    places.bookmark("place:sort=8&maxResults=10", "Most Visited", TOOLBAR, T1)
    places.place("https://visited.example/only", "Only visited", [T3])
    places.db.execute("COMMIT")
    return profile, places
