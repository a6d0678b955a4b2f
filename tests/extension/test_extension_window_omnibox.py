"""Save every tab of the window, and the address-bar keyword `mk`, in Chromium and Firefox.

The fixtures of test_extension_chromium.py (through conftest.py): both browsers, a live
`marks serve`, local pages. The omnibox's listeners are the functions on `marksActions` (a
headless browser has no address bar to type into): `omniboxInput` gets the suggestions the
browser would show, `omniboxEnter` opens.
"""

from extension.test_extension_chromium import lookup
from support.browserui import expect
from support.servers import wait_until


def open_in_window(browser, window: int, urls: list[str]) -> None:
    """Opens `urls` as tabs of `window` and waits until each has loaded."""
    create = """async ([windowId, urls]) => {
        for (const url of urls) await chrome.tabs.create({windowId, url});
    }"""
    browser.run(create, [window, urls])
    loaded = """async ([windowId, urls]) => {
        const tabs = await chrome.tabs.query({windowId});
        return urls.every((url) => tabs.some((t) => t.url === url && t.status === "complete"));
    }"""
    assert wait_until(lambda: browser.run(loaded, [window, urls]), timeout=30)


def test_the_popup_saves_every_tab_of_the_window_with_tags_asked_once(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    server.served.add(f"{pages}/tabs/known", title="Known page", tags=["old"])
    _, tab = browser.tab(f"{pages}/tabs/one")
    window = tab["windowId"]
    open_in_window(
        browser, window, [f"{pages}/tabs/known", f"{pages}/tabs/two", f"{pages}/tabs/one"]
    )

    popup = browser.extension_page(f"popup.html?window={window}")
    popup.click("nav button[data-tab=window]")
    expect(popup.locator("#window-count")).to_contain_text("tabs in this window")
    popup.fill("#window-tags", "trip, later")
    popup.click("#window-save")
    expect(popup.locator("#window-summary")).to_contain_text("2 tabs saved, 1 already bookmarked")
    report = popup.locator("#window-report li").all_text_contents()
    assert f"already bookmarked: Known page ({pages}/tabs/known)" in report
    assert f"skipped: {pages}/tabs/one: open in another tab of the window" in report
    browser.shot(popup, "popup-save-window")

    for path in ("one", "two"):
        saved = lookup(server, f"{pages}/tabs/{path}")
        assert saved["title"] == f"Page /tabs/{path}" and saved["tags"] == ["later", "trip"]
    assert lookup(server, f"{pages}/tabs/known")["tags"] == ["old"]  # reported, not changed
    assert browser.badge(tab["id"])[0] == "+"


def test_saving_the_window_while_the_server_is_down_loses_nothing(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    url = server.served.url
    server.stop()
    _, tab = browser.tab(f"{pages}/away/one")
    open_in_window(browser, tab["windowId"], [f"{pages}/away/two"])
    report = browser.run(
        "([w, tags]) => marksActions.saveWindow(w, tags)", [tab["windowId"], ["later"]]
    )
    assert sorted(entry["url"] for entry in report["kept"]) == [
        f"{pages}/away/one",
        f"{pages}/away/two",
    ]
    assert report["added"] == [] and report["failed"] == []
    assert browser.badge(tab["id"])[0] == "…"
    pending = browser.run("() => marksActions.pending()")
    assert sorted((p["url"], tuple(p["tags"])) for p in pending) == [
        (f"{pages}/away/one", ("later",)),
        (f"{pages}/away/two", ("later",)),
    ]

    server.start()
    assert server.served.url == url
    assert browser.run("() => marksActions.flushOutbox()") == {"sent": 2, "failed": 0, "left": 0}
    assert lookup(server, f"{pages}/away/two")["tags"] == ["later"]


def test_the_mk_keyword_suggests_from_full_text_search_and_enter_opens_the_best_hit(
    browser, server, pages
):
    browser.configure(server.served.url, server.served.token)
    served = server.served
    served.add(f"{pages}/rust/nomicon", title="The Rustonomicon <unsafe> & co")
    served.add(f"{pages}/python/docs", title="Python docs")
    assert browser.run("() => chrome.runtime.getManifest().omnibox") == {"keyword": "mk"}

    shown = browser.run(
        "(t) => new Promise((done) => marksActions.omniboxInput(t, done))", "rustonomicon"
    )
    assert [s["content"] for s in shown] == [f"{pages}/rust/nomicon"]
    if browser.name == "chromium":  # Chromium parses descriptions as XML; Firefox shows text
        assert shown[0]["description"].startswith("The Rustonomicon &lt;unsafe&gt; &amp; co <url>")
    else:
        assert shown[0]["description"].startswith("The Rustonomicon <unsafe> & co — ")

    opened = browser.run("(t) => marksActions.omniboxEnter(t, 'newForegroundTab')", "rustonomicon")
    assert opened == {"status": "opened", "url": f"{pages}/rust/nomicon"}
    has_tab = "async (url) => (await chrome.tabs.query({})).some((t) => t.url === url)"
    assert wait_until(lambda: browser.run(has_tab, f"{pages}/rust/nomicon"), timeout=15)
    picked = browser.run(
        "(t) => marksActions.omniboxEnter(t, 'newBackgroundTab')", f"{pages}/python/docs"
    )
    assert picked == {"status": "opened", "url": f"{pages}/python/docs"}
    assert browser.run("(t) => marksActions.omniboxEnter(t)", "nothing-matches-this") == {
        "status": "none"
    }

    url = served.url
    server.stop()
    assert (
        browser.run("(t) => new Promise((done) => marksActions.omniboxInput(t, done))", "rust")
        == []
    )
    failed = browser.run("(t) => marksActions.omniboxEnter(t)", "rust")
    assert failed == {"status": "failed", "message": f"marks serve is not reachable at {url}"}
