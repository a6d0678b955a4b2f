"""Importing straight from browser profiles: real files in a fake home, through the real CLI."""

import datetime as dt
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from marks.browsers import profiles
from support.browserfiles import (
    T1,
    T2,
    T3,
    TOOLBAR,
    add_chromium_visits,
    chrome_home,
    firefox_profile,
    safari_folder,
    safari_leaf,
    write_chromium_bookmarks,
    write_chromium_history,
    write_profiles_ini,
    write_safari_bookmarks,
    write_safari_history,
)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def bookmarks(marks) -> dict[str, dict]:
    result = marks("bookmark", "list", "--output", "json", "--limit", "1000")
    assert result.code == 0, result.err
    return {b["url"]: b for b in json.loads(result.out)}


def checksums(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


# --- finding profiles ---------------------------------------------------------------------------


def test_finder_sees_every_browser_platform_and_install_kind(home):
    chrome_home(home)
    write_chromium_bookmarks(home / "snap/chromium/common/chromium/Default", bar=[])
    write_chromium_bookmarks(home / ".config/google-chrome-beta/Default", bar=[])
    write_chromium_bookmarks(home / "AppData/Local/Microsoft/Edge/User Data/Profile 3", bar=[])
    write_chromium_bookmarks(
        home / "Library/Application Support/BraveSoftware/Brave-Browser/Default", bar=[]
    )
    ff = home / ".var/app/org.mozilla.firefox/.mozilla/firefox"
    (ff / "abc.default-release").mkdir(parents=True)
    elsewhere = home / "elsewhere/profile"
    elsewhere.mkdir(parents=True)
    write_profiles_ini(
        ff,
        {
            "Profile1": {
                "Name": "default",
                "IsRelative": "1",
                "Path": "abc.default-release",
                "Default": "1",
            },
            "Profile0": {"Name": "Custom name", "IsRelative": "0", "Path": str(elsewhere)},
            "General": {"StartWithLastProfile": "1", "Version": "2"},
        },
    )
    (home / "Library/Safari").mkdir(parents=True)
    write_safari_bookmarks(home / "Library/Safari", [])

    found = {(p.browser, p.name): p for p in profiles.find(home)}
    assert set(found) == {
        ("chrome", "Personal"),
        ("chrome", "Work"),
        ("chrome", "Default"),  # the beta channel's own profile
        ("chromium", "Default"),
        ("edge", "Profile 3"),
        ("brave", "Default"),
        ("firefox", "default"),
        ("firefox", "Custom name"),
        ("safari", "Safari"),
    }
    assert found[("chrome", "Work")].default and not found[("chrome", "Personal")].default
    assert found[("firefox", "default")].default and not found[("firefox", "Custom name")].default
    assert found[("firefox", "Custom name")].path == str(elsewhere)
    assert found[("edge", "Profile 3")].default is False  # no Default dir, no Local State


def test_firefox_install_section_wins_over_default_1(home):
    base = home / ".mozilla/firefox"
    for name in ("old.default", "new.default-release"):
        (base / name).mkdir(parents=True)
    write_profiles_ini(
        base,
        {
            "Install4F96D1932A9F858E": {"Default": "new.default-release", "Locked": "1"},
            "Profile1": {
                "Name": "default",
                "IsRelative": "1",
                "Path": "old.default",
                "Default": "1",
            },
            "Profile0": {
                "Name": "default-release",
                "IsRelative": "1",
                "Path": "new.default-release",
            },
        },
    )
    found = {p.name: p.default for p in profiles.find(home)}
    assert found == {"default": False, "default-release": True}


def test_browser_list_shows_profiles_and_counts(home, marks):
    chrome_home(home)
    listed = marks("browser", "list", "--output", "json")
    assert listed.code == 0, listed.err
    rows = {(p["browser"], p["name"]): p for p in json.loads(listed.out)}
    assert rows[("chrome", "Personal")]["bookmarks"] == 4  # the bookmarklet is still an entry
    assert rows[("chrome", "Work")]["bookmarks"] == 1
    assert rows[("chrome", "Work")]["default"] is True
    table = marks("browser", "list")
    assert "Personal" in table.out and "Work" in table.out and "yes" in table.out


# --- Chromium -----------------------------------------------------------------------------------


def test_import_chrome_folders_become_tags_and_times_are_utc(home, marks):
    chrome_home(home)
    result = marks("import", "chrome", "--verbose")
    assert result.code == 0, result.err
    # The bookmarklet is kept (issue 25): every bookmark a browser keeps.
    assert "chrome: added 5, updated 0, skipped 0, invalid 0 (2 profile(s))" in result.err
    found = bookmarks(marks)
    rust = found["https://doc.rust-lang.org/book/"]
    assert rust["tags"] == ["imported/chrome"]  # the bookmark bar is the browser's, not a tag
    assert rust["added"] == "2021-03-04T05:06:07Z"
    asyncio = found["https://docs.python.org/3/library/asyncio.html"]
    assert asyncio["tags"] == ["Dev/Python-Async", "imported/chrome"]
    assert asyncio["added"] == "2023-08-09T10:11:12Z"
    assert found["https://example.com/"]["tags"] == ["imported/chrome"]
    assert found["https://example.com/"]["visit_count"] == 0  # no --history


def test_history_brings_visits_and_all_history_adds_pages_since(home, marks):
    user_data = chrome_home(home)
    history = write_chromium_history(
        user_data / "Default",
        [
            ("https://example.com/", "Example", [T1, T2, T3]),
            ("https://news.example.net/old", "Old news", [T1]),
            ("https://news.example.net/new", "New news", [T2, T3]),
        ],
    )
    history.close()
    write_chromium_history(user_data / "Profile 1", []).close()
    result = marks("browser", "import", "chrome", "--history")
    assert result.code == 0, result.err
    found = bookmarks(marks)
    assert found["https://example.com/"]["visit_count"] == 3
    assert found["https://example.com/"]["last_visited"] == "2025-01-02T03:04:05Z"
    assert "https://news.example.net/new" not in found

    again = marks("import", "chrome", "--history", "--all-history", "--since", "2023-01")
    assert again.code == 0, again.err
    found = bookmarks(marks)
    new = found["https://news.example.net/new"]
    assert new["tags"] == ["history/chrome", "imported/chrome"]
    assert new["visit_count"] == 2 and new["last_visited"] == "2025-01-02T03:04:05Z"
    assert "https://news.example.net/old" not in found  # last visited before --since


def test_chrome_history_rows_only_in_the_wal_are_read_and_files_untouched(home, marks):
    user_data = chrome_home(home)
    history = write_chromium_history(user_data / "Default", [("https://example.com/", "E", [T1])])
    history.execute("PRAGMA wal_autocheckpoint = 0")
    history.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    add_chromium_visits(history, [("https://doc.rust-lang.org/book/", "Rust", [T2, T3])])
    assert (user_data / "Default/History-wal").stat().st_size > 0
    write_chromium_history(user_data / "Profile 1", []).close()
    before = checksums(user_data / "Default")
    try:
        result = marks("import", "chrome", "--history")
        assert result.code == 0, result.err
        assert checksums(user_data / "Default") == before
    finally:
        history.close()
    assert bookmarks(marks)["https://doc.rust-lang.org/book/"]["visit_count"] == 2


# --- Firefox ------------------------------------------------------------------------------------


def test_firefox_wal_rows_tags_folders_and_times(home, marks):
    profile, places = firefox_profile(home)
    places.db.execute("PRAGMA wal_autocheckpoint = 0")
    places.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    places.db.execute("BEGIN")
    places.bookmark("https://recent.example/", "Only in the WAL", TOOLBAR, T3, tags=["fresh"])
    places.db.execute("COMMIT")
    assert (profile / "places.sqlite-wal").stat().st_size > 0
    # The main file alone does not have the row yet: it lives only in the WAL.
    main_only = sqlite3.connect(f"file:{profile / 'places.sqlite'}?immutable=1", uri=True)
    assert main_only.execute(
        "SELECT count(*) FROM moz_places WHERE url LIKE '%recent%'"
    ).fetchone() == (0,)
    main_only.close()
    before = checksums(profile)
    try:
        result = marks("import", "firefox", "--history", "--verbose")
        assert result.code == 0, result.err
        assert checksums(profile) == before  # the browser's files were only read
    finally:
        places.db.close()
    assert "firefox: added 5, updated 0, skipped 0, invalid 0" in result.err  # place: kept
    found = bookmarks(marks)
    assert found["https://recent.example/"]["tags"] == ["fresh", "imported/firefox"]
    mozilla = found["https://www.mozilla.org/"]
    assert mozilla["tags"] == ["browsers", "imported/firefox", "oss"]
    assert mozilla["added"] == "2021-03-04T05:06:07Z"
    assert mozilla["visit_count"] == 2 and mozilla["last_visited"] == "2023-08-09T10:11:12Z"
    assert found["https://lwn.net/"]["tags"] == ["imported/firefox", "news", "Reading/Deep; nested"]
    assert found["https://unfiled.example/"]["tags"] == ["imported/firefox"]
    assert "https://visited.example/only" not in found


def test_firefox_all_history_adds_visited_pages(home, marks):
    _, places = firefox_profile(home)
    places.db.close()
    result = marks("browser", "import", "firefox", "--all-history")
    assert result.code == 0, result.err
    only = bookmarks(marks)["https://visited.example/only"]
    assert only["tags"] == ["history/firefox", "imported/firefox"]
    assert only["last_visited"] == "2025-01-02T03:04:05Z"


# --- Safari -------------------------------------------------------------------------------------


def test_safari_plist_reading_list_and_history(home, marks):
    safari = home / "Library/Safari"
    write_safari_bookmarks(
        safari,
        [
            safari_folder("BookmarksBar", [safari_leaf("https://apple.com/", "Apple")]),
            safari_folder(
                "BookmarksMenu",
                [safari_folder("Travel", [safari_leaf("https://maps.example/", "Maps")])],
            ),
            safari_folder(
                "com.apple.ReadingList",
                [
                    safari_leaf(
                        "https://longread.example/",
                        "Long read",
                        {"DateAdded": dt.datetime(2024, 6, 1, 12, 0, 0), "PreviewText": "A story"},
                    )
                ],
            ),
        ],
    )
    write_safari_history(safari, [("https://apple.com/", "Apple", [T1, T3])])
    result = marks("import", "safari", "--history")
    assert result.code == 0, result.err
    found = bookmarks(marks)
    assert found["https://apple.com/"]["tags"] == ["imported/safari"]
    assert found["https://apple.com/"]["visit_count"] == 2
    assert found["https://apple.com/"]["last_visited"] == "2025-01-02T03:04:05Z"
    assert found["https://maps.example/"]["tags"] == ["imported/safari", "Travel"]
    longread = found["https://longread.example/"]
    assert longread["tags"] == ["imported/safari", "Reading List"]
    assert longread["description"] == "A story"
    assert longread["added"] == "2024-06-01T12:00:00Z"


# --- failures, all, dry run, update -------------------------------------------------------------


def test_all_goes_on_past_a_corrupt_profile(home, marks):
    chrome_home(home)
    base = home / ".mozilla/firefox"
    (base / "p.default").mkdir(parents=True)
    (base / "p.default/places.sqlite").write_bytes(b"this is not a database" * 100)
    write_profiles_ini(
        base, {"Profile0": {"Name": "broken", "IsRelative": "1", "Path": "p.default"}}
    )
    result = marks("browser", "import", "all")
    assert result.code == 1
    errors = [line for line in result.err.splitlines() if line.startswith("marks:")]
    assert len(errors) == 1 and "p.default/places.sqlite" in errors[0]
    assert "chrome: added 5" in result.err
    assert len(bookmarks(marks)) == 5


def test_unknown_schema_and_missing_files_are_one_line_naming_the_file(home, marks):
    user_data = chrome_home(home)
    broken = sqlite3.connect(user_data / "Default/History")
    broken.execute("CREATE TABLE something_else (x)")
    broken.close()
    write_chromium_history(user_data / "Profile 1", []).close()
    result = marks("import", "chrome", "--history")
    assert result.code == 1
    assert result.err.strip().splitlines()[0].startswith("marks: ")
    assert "Default/History: unknown schema" in result.err and "no table urls" in result.err
    assert bookmarks(marks) == {}  # the browser's import is all or nothing

    (user_data / "Profile 1/Bookmarks").write_text('{"roots": {}, "version": 9}')
    listed = marks("browser", "list", "--output", "json")
    work = next(p for p in json.loads(listed.out) if p["name"] == "Work")
    assert work["bookmarks"] is None and "unknown Bookmarks version 9" in work["error"]

    missing = marks("import", "firefox", "--profile", str(home / "nowhere"))
    assert missing.code == 1 and "nowhere: no such profile directory" in missing.err


def test_dry_run_writes_nothing_and_update_merges(home, marks):
    chrome_home(home)
    dry = marks("import", "chrome", "--dry-run")
    assert dry.code == 0 and "added 5" in dry.err and "[dry run]" in dry.err
    assert bookmarks(marks) == {}
    assert marks("bookmark", "add", "https://example.com/", "--tag", "mine").code == 0
    plain = marks("import", "chrome")
    assert "added 4, updated 0, skipped 1" in plain.err
    assert bookmarks(marks)["https://example.com/"]["tags"] == ["mine"]
    merged = marks("import", "chrome", "--update", "--output", "json")
    assert merged.code == 0
    report = json.loads(merged.out)[0]["report"]
    assert report["updated"] == 5 and report["added"] == 0
    assert bookmarks(marks)["https://example.com/"]["tags"] == ["imported/chrome", "mine"]


def test_profile_option_reads_one_profile(home, marks):
    user_data = chrome_home(home)
    result = marks("import", "edge", "--profile", str(user_data / "Profile 1"))
    assert result.code == 0, result.err
    assert list(bookmarks(marks)) == ["https://wiki.example.org/"]
    assert bookmarks(marks)["https://wiki.example.org/"]["tags"] == ["imported/edge"]


def test_option_mistakes_are_usage_or_one_line_errors(home, marks):
    chrome_home(home)
    since_alone = marks("import", "chrome", "--history", "--since", "2024")
    assert since_alone.code == 1 and "--since limits --all-history" in since_alone.err
    bad_date = marks("import", "chrome", "--all-history", "--since", "yesterday-ish")
    assert bad_date.code == 2 and "not a date" in bad_date.err
    all_one_profile = marks("browser", "import", "all", "--profile", str(home))
    assert all_one_profile.code == 1 and "--profile needs one browser" in all_one_profile.err
    unknown = marks("browser", "import", "netscape-navigator")
    assert unknown.code == 2
    nothing = marks("import", "brave")
    assert nothing.code == 1 and "no brave profile found under" in nothing.err
    assert bookmarks(marks) == {}


@pytest.mark.parametrize(
    ("browser", "relative", "content"),
    [
        ("chrome", ".config/google-chrome/Default/Bookmarks", b'{"roots": {"bookmark_bar": [1'),
        ("chromium", ".config/chromium/Default/Bookmarks", b"\xff\xfe not json"),
        ("safari", "Library/Safari/Bookmarks.plist", b"bplist00 truncated"),
        (
            "safari",
            "Library/Safari/Bookmarks.plist",
            b'<?xml version="1.0"?><plist><array/></plist>',
        ),
        (
            "firefox",
            ".mozilla/firefox/p.default/places.sqlite",
            b"SQLite format 3\x00" + b"\x00" * 80,
        ),
    ],
)
def test_corrupt_files_are_one_line_naming_them(home, marks, browser, relative, content):
    path = home / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    if browser == "firefox":
        write_profiles_ini(path.parent.parent, {"Profile0": {"Name": "x", "Path": "p.default"}})
    result = marks("browser", "import", browser)
    assert result.code == 1
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("marks: ") and str(path) in lines[0]
    assert "Traceback" not in result.err
    assert bookmarks(marks) == {}
