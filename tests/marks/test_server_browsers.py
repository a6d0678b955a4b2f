"""`/browsers` on a live `marks serve` whose HOME is a fake home holding browser files written by
the test (support/browserfiles.py): the profiles it lists, imports as the CLI reports them, and
the refusals that keep a client from making the server read any other directory."""

import json
import typing

import pytest

from marks.browsers.paths import BROWSERS
from marks.server.routes_browsers import BrowserName
from support.browserfiles import (
    T1,
    T3,
    chrome_home,
    firefox_profile,
    write_chromium_bookmarks,
    write_chromium_history,
)
from support.jsonerrors import assert_error
from support.marksrun import Runner


@pytest.fixture
def home(served, monkeypatch):
    """The server's HOME (start_marks sets it), with Chrome and Firefox profiles; the in-process
    CLI that the answers are compared with looks in the same place."""
    home = served.home / "home"
    monkeypatch.setenv("HOME", str(home))
    chrome_home(home)
    _, places = firefox_profile(home)
    places.db.close()
    return home


def cli_json(db, *args: str):
    result = Runner(db)(*args, "--output", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def tagged(served, tag: str) -> dict[str, dict]:
    listed = served.http.get("/bookmarks", params={"tag": tag, "limit": 1000})
    assert listed.status_code == 200, listed.text
    return {b["url"]: b for b in listed.json()["items"]}


def total(served) -> int:
    return served.http.get("/stats").json()["bookmarks"]


def test_the_names_the_api_takes_are_the_six_browsers_and_all():
    assert typing.get_args(BrowserName) == (*BROWSERS, "all")


def test_profiles_are_listed_as_browser_list_lists_them(served, home):
    listed = served.http.get("/browsers")
    assert listed.status_code == 200
    assert listed.json() == cli_json(served.db, "browser", "list")
    rows = {(p["browser"], p["name"]): p for p in listed.json()}
    assert set(rows) == {("chrome", "Personal"), ("chrome", "Work"), ("firefox", "default")}
    assert rows[("chrome", "Personal")]["bookmarks"] == 4
    assert rows[("chrome", "Work")]["default"] is True
    assert rows[("firefox", "default")]["path"].startswith(str(home))


def test_import_reports_as_the_cli_and_the_bookmarks_are_tagged(served, home, tmp_path):
    imported = served.http.post("/browsers/import", json={"browser": "chrome"})
    assert imported.status_code == 200, imported.text
    [chrome] = imported.json()
    assert chrome["browser"] == "chrome" and chrome["errors"] == []
    assert len(chrome["profiles"]) == 2
    report = chrome["report"]
    # The bookmarklet is kept (issue 25): every bookmark a browser keeps.
    assert (report["added"], report["updated"], report["skipped"], report["invalid"]) == (
        5,
        0,
        0,
        0,
    )
    # The CLI, importing the same home into a library of its own, reports the same.
    assert imported.json() == cli_json(tmp_path / "cli.db", "browser", "import", "chrome")

    found = tagged(served, "imported/chrome")
    assert set(found) == {
        "https://doc.rust-lang.org/book/",
        "https://docs.python.org/3/library/asyncio.html",
        "https://example.com/",
        "https://wiki.example.org/",
        "javascript:alert(1)",
    }
    assert found["https://docs.python.org/3/library/asyncio.html"]["tags"] == [
        "Dev/Python-Async",
        "imported/chrome",
    ]

    again = served.http.post("/browsers/import", json={"browser": "chrome", "update": True})
    assert again.json()[0]["report"]["updated"] == 5 and total(served) == 5


def test_history_dry_run_and_all(served, home):
    write_chromium_history(
        home / ".config/google-chrome/Default", [("https://example.com/", "Example", [T1, T3])]
    ).close()
    write_chromium_history(home / ".config/google-chrome/Profile 1", []).close()

    dry = served.http.post("/browsers/import", json={"browser": "all", "dry_run": True})
    assert dry.status_code == 200
    assert {r["browser"]: r["report"]["added"] for r in dry.json()} == {"chrome": 5, "firefox": 4}
    assert total(served) == 0  # a rehearsal writes nothing

    every = served.http.post("/browsers/import", json={"browser": "all", "history": True})
    assert every.status_code == 200, every.text
    assert total(served) == 9  # a bookmarklet and a place: query kept (issue 25)
    assert tagged(served, "imported/chrome")["https://example.com/"]["visit_count"] == 2
    mozilla = tagged(served, "imported/firefox")["https://www.mozilla.org/"]
    assert mozilla["visit_count"] == 2 and "oss" in mozilla["tags"]

    pages = served.http.post(
        "/browsers/import",
        json={"browser": "firefox", "all_history": True, "since": "2024-06"},
    )
    assert pages.status_code == 200, pages.text
    assert "https://visited.example/only" in tagged(served, "history/firefox")


def test_a_profile_is_one_the_server_found_and_no_other_path(served, home, tmp_path):
    work = home / ".config/google-chrome/Profile 1"
    one = served.http.post("/browsers/import", json={"browser": "chrome", "profile": str(work)})
    assert one.status_code == 200, one.text
    assert one.json()[0]["profiles"] == [str(work)]
    assert list(tagged(served, "imported/chrome")) == ["https://wiki.example.org/"]
    # Spelled with ~ or a trailing slash it is still that profile.
    tilde = served.http.post(
        "/browsers/import",
        json={"browser": "chrome", "profile": "~/.config/google-chrome/Default/"},
    )
    assert tilde.status_code == 200 and tilde.json()[0]["report"]["added"] == 4

    # A readable Chrome profile outside the places browsers keep them is still refused.
    elsewhere = tmp_path / "elsewhere/Default"
    write_chromium_bookmarks(elsewhere, bar=[])
    refused = [
        str(elsewhere),
        "/etc",
        str(tmp_path),
        str(home / ".config/google-chrome"),  # the user-data directory, not a profile
        str(home / ".config/google-chrome/Default/../../../../elsewhere/Default"),
        "Default",  # relative: to nothing the server found
        str(
            home / "snap/firefox/common/.mozilla/firefox/x1y2z3.default"
        ),  # Firefox's, not Chrome's
        "",
    ]
    before = total(served)
    for path in refused:
        body = assert_error(
            served.http.post("/browsers/import", json={"browser": "chrome", "profile": path}), 403
        )
        assert "not a chrome profile found" in body["details"], path
    assert total(served) == before
    with_all = {"browser": "all", "profile": str(work)}
    assert_error(served.http.post("/browsers/import", json=with_all), 422)


def test_imports_from_another_site_need_the_token(served, home):
    cross = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    body = assert_error(
        served.http.post("/browsers/import", json={"browser": "all"}, headers=cross), 403
    )
    assert "cross-site" in body["details"]
    assert_error(served.http.get("/browsers", headers=cross), 403)  # paths are private too
    assert total(served) == 0
    wrong = {**cross, "Authorization": "Token not-the-token"}
    assert_error(served.http.post("/browsers/import", json={"browser": "all"}, headers=wrong), 401)
    paired = served.http.post(
        "/browsers/import", json={"browser": "chrome"}, headers={**cross, **served.authed()}
    )
    assert paired.status_code == 200 and total(served) == 5


def test_errors_are_json_with_their_codes(served, home):
    post = served.http.post
    missing = assert_error(post("/browsers/import", json={"browser": "safari"}), 404)
    assert "no safari profile found" in missing["details"]
    assert_error(post("/browsers/import", json={"browser": "netscape"}), 422)
    assert_error(post("/browsers/import", json={}), 422)
    assert_error(post("/browsers/import", json={"browser": "chrome", "verbose": True}), 422)
    assert_error(post("/browsers/import", json={"browser": "chrome", "since": "2024"}), 422)
    bad_date = {"browser": "chrome", "all_history": True, "since": "yesterday-ish"}
    assert "not a date" in assert_error(post("/browsers/import", json=bad_date), 422)["details"]
    assert_error(post("/browsers/import", content=b"{"), 400)
    # History asked for but not there: the browser's import fails and nothing is written.
    failed = assert_error(
        post("/browsers/import", json={"browser": "chrome", "history": True}), 422
    )
    assert "History" in failed["details"]
    assert total(served) == 0
