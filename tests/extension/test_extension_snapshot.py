"""The extension's "Save a snapshot of this page" in Debian's chromium, against a live `marks
serve` and a local page behind a cookie login: the page is captured as the logged-in user sees
it (marks itself would get "log in first"), its stylesheet and picture inlined from the page's
own context, its script and handler gone; by the background action (context menu, shortcut)
and by the popup's button, which then links to the latest snapshot."""

import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from support import chromium_path
from support.marksserve import Served, start_marks
from support.snapshotsite import SnapshotSite

ROOT = Path(__file__).parents[2]
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("extension")
    subprocess.run([sys.executable, str(ROOT / "extension" / "build.py"), str(out)], check=True)
    return out / "extension-chromium"


@pytest.fixture
def served(tmp_path):
    server = Served(
        start_marks(tmp_path / "library.db", tmp_path), tmp_path / "library.db", tmp_path
    )
    yield server
    server.close()


@pytest.fixture
def site():
    with SnapshotSite() as running:
        yield running


@pytest.fixture
def chromium(built, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=chromium_path(),
            args=[*ARGS, f"--disable-extensions-except={built}", f"--load-extension={built}"],
        )
        try:
            worker = context.service_workers[0] if context.service_workers else None
            if worker is None:
                worker = context.wait_for_event("serviceworker", timeout=30_000)
            yield context, worker
        finally:
            context.close()


def _logged_in_tab(context, worker, site):
    page = context.new_page()
    page.goto(site.url("/login"))
    page.goto(site.url("/private"))
    assert page.inner_text("#secret") == "The members-only tide table"
    tab = worker.evaluate(
        "async (url) => (await chrome.tabs.query({})).find((t) => t.url === url)",
        site.url("/private"),
    )
    assert tab is not None
    return page, tab


def test_a_page_behind_a_login_is_captured_as_the_user_sees_it(chromium, served, site, tmp_path):
    context, worker = chromium
    worker.evaluate(
        "(v) => chrome.storage.local.set(v)", {"server": served.url, "token": served.token}
    )
    _, tab = _logged_in_tab(context, worker, site)
    result = worker.evaluate("(tab) => marksActions.snapshotTab(tab)", tab)
    assert result["status"] == "saved", result
    assert result["added"] is True and result["omitted"] == []
    bookmark = served.http.get("/bookmarks/lookup", params={"url": site.url("/private")}).json()
    listed = served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json()
    assert [item["source"] for item in listed] == ["browser"]
    html = served.http.get(f"/snapshots/{listed[0]['id']}").text
    assert "The members-only tide table" in html and "log in first" not in html
    assert 'src="data:image/png;base64,' in html  # the picture, fetched with the page's cookie
    assert "letter-spacing: 2px" in html  # its stylesheet, inlined
    assert "<script" not in html and "onerror" not in html
    assert site.hits["/img/private.png"] >= 2  # the page's own load, and the capture's
    # marks fetching the page itself is refused: only the browser has the session.
    refused = served.http.post(f"/bookmarks/{bookmark['id']}/snapshots", json={})
    assert refused.status_code == 422 and "HTTP 403" in refused.json()["details"]
    # The context menu item does the same, for a page that is a bookmark already.
    again = worker.evaluate("(tab) => marksActions.menu('save-snapshot', {}, tab)", tab)
    assert again["status"] == "saved" and again["added"] is False
    assert len(served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json()) == 2
    commands = {c["name"] for c in worker.evaluate("() => chrome.commands.getAll()")}
    assert "save-snapshot" in commands


def test_the_popup_saves_a_snapshot_and_links_to_the_latest(chromium, served, site, tmp_path):
    context, worker = chromium
    worker.evaluate(
        "(v) => chrome.storage.local.set(v)", {"server": served.url, "token": served.token}
    )
    _, tab = _logged_in_tab(context, worker, site)
    extension_id = worker.url.split("/")[2]
    popup = context.new_page()
    popup.set_viewport_size({"width": 380, "height": 520})
    popup.goto(f"chrome-extension://{extension_id}/popup.html?url={tab['url']}&tab={tab['id']}")
    expect(popup.locator("#snapshot")).to_be_visible()
    assert popup.locator("#snapshot-latest").is_hidden()
    popup.click("#snapshot")
    expect(popup.locator("#status")).to_contain_text("Snapshot saved")
    expect(popup.locator("#save")).to_have_text("Save")  # the page is a bookmark now
    assert popup.input_value("#title") == "Members only"
    link = popup.locator("#snapshot-latest")
    expect(link).to_be_visible()
    href = link.get_attribute("href")
    assert href.startswith(f"{served.url}/snapshots/")
    popup.screenshot(path=str(tmp_path / "popup-snapshot.png"), full_page=True)
    with context.expect_page() as opening:  # the link, clicked as a person would
        link.click()
    opened = opening.value
    opened.wait_for_load_state()
    assert opened.inner_text("#secret") == "The members-only tide table"
    assert opened.evaluate("() => window.ran") is None  # the page's script did not come along
