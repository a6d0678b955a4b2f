"""Snapshots over HTTP against a live `marks serve`: capture (what the extension sends), fetch,
list, delete; and viewing is safe -- a snapshot holding a script that calls the API, or an
`onerror=` handler, changes nothing when opened in Chromium or Firefox, directly or in the web
UI's frame."""

import http.server
import threading
import zlib

import pytest

from marks import pagestore
from marks.store import Store
from support.browserui import BROWSERS, expect, launch
from support.marksserve import Served, start_marks
from support.samesite import SameOriginPage
from support.servers import wait_until
from support.snapshotsite import SnapshotSite, public_env

ATTACK = (
    "<!doctype html><html><head><title>Hostile</title></head><body>"
    "<p id='text'>looks harmless</p>"
    "<script>fetch('/bookmarks/1', {method: 'DELETE'}); document.title = 'ran';</script>"
    "<img src=x onerror=\"fetch('/bookmarks/1', {method: 'DELETE'}); document.title = 'ran'\">"
    "</body></html>"
)


def _raw_snapshot(db, bookmark_id: int, html: str) -> int:
    """A snapshot stored as is, past the sanitiser: what the sandbox must hold on its own."""
    store = Store(db)
    try:
        with store.transaction():
            blob = pagestore.put(store, html.encode())
            return store.value(
                "INSERT INTO snapshots (bookmark_id, taken_at, url, source, blob, size) "
                "VALUES (?, '2026-11-26T00:00:00Z', 'https://x.example/', 'browser', ?, ?) "
                "RETURNING id",
                (bookmark_id, blob, len(html)),
            )
    finally:
        store.close()


@pytest.fixture
def served(tmp_path):
    """A live server that counts 127.0.0.2, the snapshot site's second host, as public."""
    db = tmp_path / "library.db"
    server = Served(start_marks(db, tmp_path, env=public_env()), db, tmp_path)
    yield server
    server.close()


def test_capture_list_view_and_delete(served):
    bookmark = served.add("https://captured.example/", title="Captured")
    sent = served.http.post(
        f"/bookmarks/{bookmark['id']}/snapshots",
        json={"html": ATTACK, "url": "https://captured.example/"},
    )
    assert sent.status_code == 201, sent.text
    snapshot = sent.json()
    assert snapshot["source"] == "browser" and snapshot["bookmark_id"] == bookmark["id"]
    assert snapshot["title"] == "Hostile"
    listed = served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json()
    assert [item["id"] for item in listed] == [snapshot["id"]]
    shown = served.http.get(f"/snapshots/{snapshot['id']}")
    assert shown.status_code == 200
    assert shown.headers["content-type"] == "text/html; charset=utf-8"
    assert shown.headers["content-security-policy"].startswith("sandbox;")
    assert "default-src 'none'" in shown.headers["content-security-policy"]
    assert shown.headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in shown.headers
    assert len(shown.headers.get_list("content-security-policy")) == 1  # not the UI's as well
    # Sanitised again on the server: the client is trusted with nothing.
    assert "<script" not in shown.text and "onerror" not in shown.text
    assert "looks harmless" in shown.text
    # Its text is the bookmark's content, so search finds it.
    hits = served.http.get("/search", params={"q": "harmless", "fts": 1}).json()
    assert [hit["bookmark"]["id"] for hit in hits["hits"]] == [bookmark["id"]]
    assert served.http.delete(f"/snapshots/{snapshot['id']}").status_code == 204
    assert served.http.get(f"/snapshots/{snapshot['id']}").status_code == 404
    assert served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json() == []


def test_bad_captures_are_refused_with_json_errors(served):
    bookmark = served.add("https://captured.example/")
    too_big = served.http.post(
        f"/bookmarks/{bookmark['id']}/snapshots", json={"html": "<p>" + "x" * (21 * 1024 * 1024)}
    )
    assert too_big.status_code == 413 and too_big.json()["error"] == "Payload too large"
    missing = served.http.post("/bookmarks/999/snapshots", json={"html": "<p>x</p>"})
    assert missing.status_code == 404 and missing.json()["error"] == "Not found"
    unknown = served.http.post(f"/bookmarks/{bookmark['id']}/snapshots", json={"page": 1})
    assert unknown.status_code == 422
    assert served.http.get("/snapshots/12345").status_code == 404
    assert served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json() == []


def test_without_html_the_server_fetches_the_page_itself(served):
    with SnapshotSite() as site:
        bookmark = served.add(site.url("/article"))
        taken = served.http.post(f"/bookmarks/{bookmark['id']}/snapshots", json={})
        assert taken.status_code == 201, taken.text
        body = served.http.get(f"/snapshots/{taken.json()['id']}").text
    assert "skerries" in body and "data:font/woff2" in body and "<script" not in body
    assert {"url": site.other("/img/missing.png"), "reason": "HTTP 404"} in taken.json()["omitted"]
    refused = served.http.post("/bookmarks/999/snapshots", json={})
    assert refused.status_code == 404


@pytest.fixture(scope="module", params=BROWSERS)
def browser(request, tmp_path_factory):
    with launch(request.param, tmp_path_factory.mktemp(request.param)) as launched:
        yield launched


def _snapshot_frame(page):
    """The web UI's snapshot frame once its document is the snapshot (a Playwright frame in
    Chromium, a BiDi child context in Firefox)."""
    found = []

    def loaded() -> bool:
        # A round trip to the page first: Playwright's sync API learns of new frames only while
        # it talks to the browser.
        page.locator("#snapshot-frame").count()
        found[:] = [f for f in page.frames[1:] if "/snapshots/" in f.url]
        return bool(found)

    assert wait_until(loaded, timeout=15), "no snapshot frame"
    found[0].wait_for_load_state()
    return found[0]


def _deletes(served, since: int) -> list[str]:
    """The DELETE requests marks' access log shows after line `since`, refused ones included."""
    return [line for line in served.process.lines[since:] if '"DELETE ' in line]


def test_opening_a_hostile_snapshot_changes_nothing(served, browser, tmp_path):
    target = served.add("https://target.example/", title="Must survive")
    control = served.add("https://control.example/", title="Deleted by the control page")
    hostile = _raw_snapshot(served.db, target["id"], ATTACK)
    page = browser.new_page()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    # The control: the same HTML served as marks' own page without the sandbox does run, and
    # deletes a bookmark -- so what follows would see it if the sandbox let anything through.
    attack = ATTACK.replace("/bookmarks/1", f"/bookmarks/{control['id']}")
    with SameOriginPage(served.url, attack) as beside:
        page.goto(f"{beside.url}/control")
        page.wait_for_function("() => document.title === 'ran'")
        assert wait_until(
            lambda: served.http.get(f"/bookmarks/{control['id']}").status_code == 404, timeout=15
        )
    assert _deletes(served, 0), "the access log shows no DELETE: the check below would be blind"
    since = len(served.process.lines)

    page.goto(f"{served.url}/snapshots/{hostile}")
    assert page.locator("#text").text_content() == "looks harmless"
    assert page.evaluate("() => document.title") == "Hostile"  # no script or handler ran
    page.screenshot(path=str(shots / f"snapshot-direct-{browser.name}.png"))
    # In the web UI: listed in the editor, opened in a sandboxed frame.
    page.goto(served.url + "/")
    page.wait_for_selector("body[data-loaded=true]")
    page.click("#list > li >> text=Edit")
    page.wait_for_selector("#snapshot-list .open-snapshot")
    page.screenshot(path=str(shots / f"editor-snapshots-{browser.name}.png"))
    page.click("#snapshot-list .open-snapshot")
    page.wait_for_selector("#snapshot-frame")
    assert page.locator("#snapshot-frame").get_attribute("sandbox") == ""
    frame = _snapshot_frame(page)
    frame.wait_for_selector("#text")
    assert frame.evaluate("() => document.title") == "Hostile"
    page.screenshot(path=str(shots / f"snapshot-viewer-{browser.name}.png"))
    # Nothing reached the API (a script that ran would show here, even refused).
    served.http.get("/bookmarks/lookup", params={"url": "https://log-marker.invalid/"})
    assert wait_until(lambda: "log-marker.invalid" in "".join(served.process.lines[since:]))
    assert not _deletes(served, since), _deletes(served, since)
    assert served.http.get(f"/bookmarks/{target['id']}").status_code == 200
    browser.close_page(page)


def test_stored_pages_stay_compressed_in_the_database(served):
    bookmark = served.add("https://big.example/")
    page = "<p>" + "the same sentence again. " * 20000 + "</p>"
    sent = served.http.post(f"/bookmarks/{bookmark['id']}/snapshots", json={"html": page})
    assert sent.status_code == 201
    store = Store(served.db)
    try:
        stored = store.value(
            "SELECT data FROM snapshot_blobs b JOIN snapshots s "
            "ON s.blob = b.sha256 WHERE s.id = ?",
            (sent.json()["id"],),
        )
    finally:
        store.close()
    assert len(stored) < len(page) / 20 and b"same sentence" in zlib.decompress(stored)


def test_the_web_ui_takes_a_snapshot_and_opens_it_sandboxed(served, browser, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with SnapshotSite() as site:
        served.add(site.url("/article"), title="The article")
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(served.url + "/")
        page.wait_for_selector("body[data-loaded=true]")
        page.click("#list > li >> text=Edit")
        expect(page.locator("#snapshot-status")).to_have_text("No snapshots yet.")
        page.click("#snapshot-take")
        expect(page.locator("#snapshot-status")).to_have_text("Snapshot taken.")
        expect(page.locator("#snapshot-list .snapshot")).to_have_count(1)
        assert "left out" in page.inner_text("#snapshot-list")  # the 404 image and frame 3
        page.click("#snapshot-list .open-snapshot")
        page.wait_for_selector("#snapshot-frame")
        frame = _snapshot_frame(page)
        frame.wait_for_selector("h1")
        assert frame.inner_text("h1") == "The lighthouse keeper's diary"
        assert frame.evaluate("() => document.title") == "Lighthouse keepers"  # not renamed
        page.screenshot(path=str(shots / f"snapshot-taken-in-ui-{browser.name}.png"))
        page.click("#snapshot-close")
        expect(page.locator("#snapshot-frame")).to_have_count(0)
        browser.close_page(page)
    assert not errors, errors


def test_snapshot_on_add_takes_one_for_bookmarks_added_through_the_api(tmp_path):
    config = tmp_path / "config" / "marks"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("snapshot_on_add = true\n")
    served = Served(
        start_marks(tmp_path / "library.db", tmp_path, env=public_env()),
        tmp_path / "library.db",
        tmp_path,
    )
    try:
        with SnapshotSite() as site:
            added = served.add(site.url("/article"))  # answered at once; the snapshot follows
            path = f"/bookmarks/{added['id']}/snapshots"
            assert wait_until(lambda: served.http.get(path).json(), timeout=30)
            assert served.http.get(path).json()[0]["source"] == "fetch"
            assert site.hits["/article"] == 1
    finally:
        served.close()


# Markup a parser reads one way and, serialised and parsed again, another (mutation XSS): a
# raw-text element (style, xmp, noembed, ...) inside SVG/MathML, or moved there by the table
# rules, comes back as live markup. Each handler here would retitle the page.
MUTATING = [
    "<svg><style>&lt;img src=x onerror=\"document.title='ran'\"&gt;</style></svg>",
    "<math><xmp>&lt;img src=x onerror=\"document.title='ran'\"&gt;</xmp></math>",
    "<math><mtext><table><mglyph><style><img src=x onerror=\"document.title='ran'\">",
    "<math><mtext><table><mglyph><noembed><img src=x onerror=\"document.title='ran'\">",
    "<svg><iframe>&lt;img src=x onerror=\"document.title='ran'\"&gt;</iframe></svg>",
    "<math><plaintext>&lt;img src=x onerror=\"document.title='ran'\"&gt;</plaintext></math>",
]
# What a capture may still point at on the network: an exported snapshot opened from a file
# must not tell anyone it was opened.
TRACKERS = (
    "<img src='http://tracker.invalid/img.gif'>"
    "<video src='http://tracker.invalid/video.mp4' poster='http://tracker.invalid/poster.png'>"
    "</video><table background='http://tracker.invalid/table.png'><tr><td>x</td></tr></table>"
    "<div style=\"background: url('http://tracker.invalid/css.png')\">a</div>"
    "<div style='background: \\75rl(http://tracker.invalid/escaped.png)'>b</div>"
    "<style>@import 'http://tracker.invalid/import.css';"
    "p { background-image: image-set('http://tracker.invalid/set.png' 1x) }</style>"
    "<svg><image href='http://tracker.invalid/svg.png'/></svg>"
    "<iframe src='http://tracker.invalid/frame.html'></iframe>"
)


class _Tracker(http.server.ThreadingHTTPServer):
    """A loopback stand-in for a tracker: counts every request a page makes to it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        tracker = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                tracker.hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_an_exported_capture_runs_nothing_and_loads_nothing_when_opened_from_a_file(
    served, browser, tmp_path
):
    tracker = _Tracker()
    try:
        bookmark = served.add("https://captured.example/", title="Captured")
        page_html = (
            "<!doctype html><html><head><title>Captured</title></head><body><p id=text>kept</p>"
            + "".join(MUTATING)
            + TRACKERS.replace("http://tracker.invalid", tracker.url)
            + "</body></html>"
        )
        sent = served.http.post(f"/bookmarks/{bookmark['id']}/snapshots", json={"html": page_html})
        assert sent.status_code == 201, sent.text
        exported = tmp_path / "snapshot.html"
        exported.write_bytes(served.http.get(f"/snapshots/{sent.json()['id']}").content)
        raw = tmp_path / "raw.html"
        raw.write_text(page_html, encoding="utf-8")
        page = browser.new_page()
        try:
            # The control: the capture as sent, opened from a file, does reach the tracker.
            page.goto(raw.as_uri())
            assert wait_until(lambda: tracker.hits), "the tracker saw nothing: the check is blind"
            tracker.hits.clear()
            # Opened as `marks snapshot export` leaves it: a file, without the server's CSP.
            page.goto(exported.as_uri())
            assert page.text_content("#text") == "kept"
            assert page.evaluate("document.title") == "Captured"  # no handler ran
            assert tracker.hits == []
        finally:
            browser.close_page(page)
    finally:
        tracker.shutdown()
        tracker.server_close()
