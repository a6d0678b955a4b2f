"""The extension's "Save a snapshot of this page" in Debian's chromium and firefox-esr (the shared
`browser` fixture of tests/extension), against a live `marks serve` and a local page behind a
cookie login: the page is captured as the logged-in user sees it (marks itself would get "log in
first"), its stylesheet and picture inlined from the page's own context, its script and handler
gone; by the background action (context menu, shortcut) and by the popup's button, which then
links to the latest snapshot."""

import base64

import pytest

from support.browserui import expect
from support.servers import wait_until
from support.snapshotsite import PNG, SnapshotSite


@pytest.fixture
def site():
    with SnapshotSite() as running:
        yield running


def _logged_in_tab(browser, site):
    """A tab on the members-only page, after logging in (the session cookie) in another tab."""
    login, _ = browser.tab(site.url("/login"))
    assert "logged in" in login.inner_text("body")
    page, tab = browser.tab(site.url("/private"))
    assert page.inner_text("#secret") == "The members-only tide table"
    return page, tab


def test_a_page_behind_a_login_is_captured_as_the_user_sees_it(browser, server, site):
    served = server.served
    browser.configure(served.url, served.token)
    _, tab = _logged_in_tab(browser, site)
    pictures = site.hits["/members/picture.png"]
    result = browser.run("(tab) => marksActions.snapshotTab(tab)", tab)
    assert result["status"] == "saved", result
    assert result["added"] is True and result["omitted"] == []
    bookmark = served.http.get("/bookmarks/lookup", params={"url": site.url("/private")}).json()
    listed = served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json()
    assert [item["source"] for item in listed] == ["browser"]
    html = served.http.get(f"/snapshots/{listed[0]['id']}").text
    assert "The members-only tide table" in html and "log in first" not in html
    # The members-only picture and stylesheet (403 without the session cookie), inlined.
    picture = base64.b64encode(PNG + b"members").decode()
    assert f'src="data:image/png;base64,{picture}"' in html
    assert "letter-spacing: 2px" in html
    assert "<script" not in html and "onerror" not in html
    assert site.hits["/members/picture.png"] > pictures  # the capture asked the site for it
    # marks fetching the page itself is refused: only the browser has the session.
    refused = served.http.post(f"/bookmarks/{bookmark['id']}/snapshots", json={})
    assert refused.status_code == 422 and "HTTP 403" in refused.json()["details"]
    # The context menu item does the same, for a page that is a bookmark already.
    again = browser.run("(tab) => marksActions.menu('save-snapshot', {}, tab)", tab)
    assert again["status"] == "saved" and again["added"] is False
    assert len(served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json()) == 2
    commands = {c["name"] for c in browser.run("() => chrome.commands.getAll()")}
    assert "save-snapshot" in commands


def test_the_popup_saves_a_snapshot_and_links_to_the_latest(browser, server, site):
    served = server.served
    browser.configure(served.url, served.token)
    _, tab = _logged_in_tab(browser, site)
    popup = browser.extension_page(f"popup.html?url={tab['url']}&tab={tab['id']}")
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
    browser.shot(popup, "popup-snapshot")
    link.click()  # as a person would: the extension opens it in a new tab

    def opened():
        # The driver hears of the new tab, and of its navigation away from about:blank, a moment
        # after the browser lists it, and only during a call to the browser: make one, then look.
        browser.run("async () => (await chrome.tabs.query({})).length")
        return next((p for p in browser.context.pages if p.url == href), None)

    assert wait_until(opened, timeout=15), href
    snapshot = opened()
    snapshot.wait_for_load_state()
    assert snapshot.inner_text("#secret") == "The members-only tide table"
    assert snapshot.evaluate("() => window.ran") is None  # the page's script did not come along
    browser.shot(snapshot, "snapshot-opened-from-popup")
