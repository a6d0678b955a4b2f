"""The extension's "Save a snapshot of this page" in Debian's chromium and firefox-esr (the shared
`browser` fixture of tests/extension), against a live `marks serve` and a local page behind a
cookie login: the page is captured as the logged-in user sees it (marks itself would get "log in
first"), its stylesheet and picture inlined from the page's own context, its script and handler
gone; by the background action (context menu, shortcut) and by the popup's button, which then
links to the latest snapshot. The page's stylesheet, font and picture on another host (a CDN that
sends no CORS headers, the picture for its logged-in users) are left out and listed until the user
turns on "Include images and styles from other sites" in the options; then the extension fetches
them itself, with the user's cookies for the CDN."""

import base64

import pytest

from support.browserui import expect
from support.firefoxextension import extension_firefox
from support.servers import wait_until
from support.snapshotsite import CDN_CSS, CDN_FONT, CDN_PNG, PNG, SnapshotSite

# The reason a capture gives for another site's file when other sites are not allowed
# (extension/src/lib/crosssite.js), which tells the user what to turn on.
NEEDS_PERMISSION = (
    "another site's file that the page may not read (no CORS): turn on \"Include images and "
    "styles from other sites\" in the marks extension's options to keep it"
)
OTHER_SITES = ["http://*/*", "https://*/*"]


@pytest.fixture(scope="module")
def firefox(tmp_path_factory):
    """This module's firefox-esr answers an extension's request for optional permissions as the
    user who clicks "Allow" in its prompt does (Mozilla's own pref for tests); the request still
    needs the click in the page."""
    started = extension_firefox(
        tmp_path_factory.mktemp("firefox"), {"extensions.webextOptionalPermissionPrompts": False}
    )
    yield started
    started.close()


@pytest.fixture
def site():
    with SnapshotSite() as running:
        yield running


def _logged_in_tab(browser, site):
    """A tab on the members-only page, after logging in (the session cookie) in another tab, and
    in to the CDN that serves its picture in a third."""
    login, _ = browser.tab(site.url("/login"))
    assert "logged in" in login.inner_text("body")
    cdn, _ = browser.tab(site.other("/cdn/login"))
    assert "logged in to the CDN" in cdn.inner_text("body")
    page, tab = browser.tab(site.url("/private"))
    assert page.inner_text("#secret") == "The members-only tide table"
    # The user sees the CDN's picture (an image needs no CORS to be shown, only to be read).
    wait_until(lambda: page.evaluate("() => document.getElementById('wave').naturalWidth") == 1)
    return page, tab


def _cdn_left_out(site):
    """What a capture without other sites lists: the CDN's stylesheet (so its font is not even
    seen) and picture, each with the reason that says what to turn on."""
    return [
        {"url": site.other("/cdn/tide.css"), "reason": NEEDS_PERMISSION},
        {"url": site.other("/cdn/wave.png"), "reason": NEEDS_PERMISSION},
    ]


def _snapshot_html(served, result):
    return served.http.get(f"/snapshots/{result['snapshot']['id']}").text


def test_a_page_behind_a_login_is_captured_as_the_user_sees_it(browser, server, site):
    served = server.served
    browser.configure(served.url, served.token)
    _, tab = _logged_in_tab(browser, site)
    pictures = site.hits["/members/picture.png"]
    result = browser.run("(tab) => marksActions.snapshotTab(tab)", tab)
    assert result["status"] == "saved", result
    assert result["added"] is True
    assert sorted(result["omitted"], key=lambda item: item["url"]) == _cdn_left_out(site)
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
    assert base64.b64encode(CDN_PNG).decode() not in html  # other sites are not allowed
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
    expect(popup.locator("#status")).to_contain_text("2 resource(s) left out")
    # The CDN's files were left out for want of the permission: the popup offers to ask for it.
    expect(popup.locator("#snapshot-other-sites")).to_be_visible()
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


@pytest.mark.parametrize("chromium_granted_hosts", [OTHER_SITES])
def test_other_sites_files_come_inlined_once_allowed_in_the_options(browser, server, site):
    """The toggle "Include images and styles from other sites": on, the CDN's stylesheet, its font
    and the logged-in user's picture are in the snapshot, byte for byte, and nothing is left out;
    turned off with a click, they are left out again and listed with the reason. The test turns
    it on with a click in both browsers. Firefox's prompt is answered by the pref above; headless
    Chromium's is a native dialog no driver can answer, so its profile starts with the permission
    granted, as for a user who allowed it before and turned the toggle off since (the browser
    keeps the access), where the click asks without a prompt."""
    served = server.served
    browser.configure(served.url, served.token)
    _, tab = _logged_in_tab(browser, site)
    options = browser.extension_page("options.html")
    toggle = options.locator("#other-sites")
    expect(toggle).to_be_visible()
    assert not toggle.is_checked()
    browser.shot(options, "options-other-sites-off")
    toggle.click()
    expect(options.locator("#other-sites-result")).to_have_text(
        "Snapshots include images and styles from other sites"
    )
    assert toggle.is_checked()
    browser.shot(options, "options-other-sites-on")
    waves = site.hits["/cdn/wave.png"]

    result = browser.run("(tab) => marksActions.snapshotTab(tab)", tab)
    assert result["status"] == "saved", result
    assert result["omitted"] == []
    html = _snapshot_html(served, result)
    assert f'src="data:image/png;base64,{base64.b64encode(CDN_PNG).decode()}"' in html
    assert f"data:font/woff2;base64,{base64.b64encode(CDN_FONT).decode()}" in html
    assert "#secret { font-family: Tide }" in html and CDN_CSS.decode() not in html  # inlined
    assert f'src="data:image/png;base64,{base64.b64encode(PNG + b"members").decode()}"' in html
    # The picture needs the CDN login: the extension's fetch carried the user's CDN cookie.
    assert site.hits["/cdn/wave.png"] > waves

    toggle.click()  # off again
    expect(options.locator("#other-sites-result")).to_have_text(
        "Other sites' files are left out of snapshots"
    )
    assert not toggle.is_checked()
    again = browser.run("(tab) => marksActions.snapshotTab(tab)", tab)
    assert again["status"] == "saved", again  # marks serve on loopback is still reachable
    assert sorted(again["omitted"], key=lambda item: item["url"]) == _cdn_left_out(site)
    html = _snapshot_html(served, again)
    assert base64.b64encode(CDN_PNG).decode() not in html
    assert "The members-only tide table" in html


@pytest.mark.parametrize("chromium_granted_hosts", [OTHER_SITES])
def test_the_popup_asks_for_other_sites_when_a_snapshot_left_their_files_out(browser, server, site):
    """A snapshot saved from the popup that left the CDN's files out for want of the permission
    offers to ask for it; one click (the browser's prompt answered as in the test above) and the
    next snapshot, captured by the popup itself, has them."""
    served = server.served
    browser.configure(served.url, served.token)
    _, tab = _logged_in_tab(browser, site)
    popup = browser.extension_page(f"popup.html?url={tab['url']}&tab={tab['id']}")
    offer = popup.locator("#snapshot-other-sites")
    assert offer.is_hidden()
    popup.click("#snapshot")
    expect(popup.locator("#status")).to_contain_text("2 resource(s) left out")
    expect(offer).to_be_visible()
    expect(offer).to_have_text("Include other sites' images next time")
    browser.shot(popup, "popup-snapshot-other-sites-offer")
    offer.click()
    expect(popup.locator("#status")).to_have_text(
        "Allowed: save the snapshot again to include them"
    )
    assert offer.is_hidden()
    popup.click("#snapshot")
    expect(popup.locator("#status")).to_contain_text("KB)")
    assert "left out" not in popup.inner_text("#status")
    assert offer.is_hidden()
    bookmark = served.http.get("/bookmarks/lookup", params={"url": site.url("/private")}).json()
    latest = served.http.get(f"/bookmarks/{bookmark['id']}/snapshots").json()[0]
    html = served.http.get(f"/snapshots/{latest['id']}").text
    assert f'src="data:image/png;base64,{base64.b64encode(CDN_PNG).decode()}"' in html
    assert f"data:font/woff2;base64,{base64.b64encode(CDN_FONT).decode()}" in html
