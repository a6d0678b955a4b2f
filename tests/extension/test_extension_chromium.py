"""The extension in Debian's chromium (loaded unpacked) and firefox-esr (its Firefox build installed
over WebDriver BiDi), against a live `marks serve`: every test runs in both browsers.

Pages to bookmark come from a small local HTTP server (never the internet). The commands and menu
entries are invoked through the background's `marksActions` (Chromium's service worker, Firefox's
background page), the same functions the browser calls; the badge is read back with
`chrome.action`. Screenshots land in the test's tmp dir.
"""

import hashlib
import http.server
import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support import chromium_path
from support.browserui import BROWSERS, expect
from support.firefoxextension import FirefoxExtension, extension_firefox
from support.marksserve import Served, start_marks
from support.servers import wait_until

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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Pages(http.server.BaseHTTPRequestHandler):
    """/any/path answers a page whose title is the path, with a link and some text to select."""

    def do_GET(self) -> None:
        body = (
            f"<!doctype html><title>Page {self.path}</title>"
            f"<p id=text>Some words worth keeping</p>"
            f'<a id=link href="/linked/target">The linked target</a>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def pages():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The build folder: extension-chromium/ unpacked, marks-extension-firefox.zip."""
    out = tmp_path_factory.mktemp("extension")
    subprocess.run([sys.executable, str(ROOT / "extension" / "build.py"), str(out)], check=True)
    return out


class Server:
    """A `marks serve` on a fixed port, so it can be stopped and started again at the same URL."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = _free_port()
        self.served: Served | None = None

    def start(self) -> Served:
        process = start_marks(self.home / "library.db", self.home, "--port", str(self.port))
        self.served = Served(process, self.home / "library.db", self.home)
        return self.served

    def stop(self) -> None:
        if self.served is not None:
            self.served.close()
            self.served = None


@pytest.fixture
def server(tmp_path):
    running = Server(tmp_path)
    running.start()
    yield running
    running.stop()


class Browser:
    name = "chromium"

    def __init__(self, context, worker, shots: Path) -> None:
        self.context = context
        self.worker = worker
        self.extension_id = worker.url.split("/")[2]
        self.shots = shots
        self.shortcuts_page = "chrome://extensions/shortcuts"

    def run(self, script: str, arg=None):
        return self.worker.evaluate(script, arg)

    def configure(self, server_url: str, token: str, **extra) -> None:
        self.run(
            "(values) => chrome.storage.local.set(values)",
            {"server": server_url, "token": token, **extra},
        )

    def tab(self, url: str):
        """Open a real tab on `url`; returns (page, the tab as the extension sees it)."""
        page = self.context.new_page()
        page.goto(url)
        tab = self.run(
            """async (url) => {
                 const tabs = await chrome.tabs.query({});
                 return tabs.find((t) => t.url === url);
               }""",
            url,
        )
        assert tab is not None, url
        return page, tab

    def badge(self, tab_id: int) -> tuple[str, list[int]]:
        return tuple(
            self.run(
                """async (tabId) => [await chrome.action.getBadgeText({tabId}),
                                     await chrome.action.getBadgeBackgroundColor({tabId})]""",
                tab_id,
            )
        )

    def extension_page(self, path: str):
        page = self.context.new_page()
        if path.startswith("popup.html"):
            page.set_viewport_size({"width": 380, "height": 460})  # the size a popup opens at
        page.goto(f"chrome-extension://{self.extension_id}/{path}")
        return page

    def shot(self, page, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def firefox(tmp_path_factory):
    """One firefox-esr per module (started when a Firefox test first asks for it)."""
    started = extension_firefox(tmp_path_factory.mktemp("firefox"))
    yield started
    started.close()


def unpacked_id(folder: Path) -> str:
    """The id Chromium gives an extension loaded unpacked from `folder`: its path's SHA-256, the
    first 32 hex digits written with the letters a-p."""
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:32]
    return "".join(chr(ord("a") + int(digit, 16)) for digit in digest)


def allow_hosts(profile: Path, extension: Path, hosts: list[str]) -> None:
    """A profile in which the user allowed `hosts` (optional host permissions) to the extension
    earlier. Headless Chromium's permission prompt is a native dialog that no driver can answer,
    so a test cannot grant them with a click; Chromium keeps granted permissions in the profile's
    Preferences, where this puts them."""
    settings = {
        "granted_permissions": {"explicit_host": hosts},
        "active_permissions": {"explicit_host": hosts},
    }
    prefs = {"extensions": {"settings": {unpacked_id(extension): settings}}}
    (profile / "Default").mkdir(parents=True)
    (profile / "Default" / "Preferences").write_text(json.dumps(prefs))


@pytest.fixture
def chromium_granted_hosts() -> list[str]:
    """Optional host permissions the Chromium profile starts with (a test parametrizes this)."""
    return []


@pytest.fixture(params=BROWSERS)
def browser(request, built, tmp_path, chromium_granted_hosts):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    if request.param == "firefox":
        archive = built / "marks-extension-firefox.zip"
        with FirefoxExtension(archive, request.getfixturevalue("firefox"), shots) as installed:
            yield installed
        return
    from playwright.sync_api import sync_playwright

    built = built / "extension-chromium"
    if chromium_granted_hosts:
        allow_hosts(tmp_path / "profile", built, chromium_granted_hosts)
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
            if chromium_granted_hosts:
                assert worker.url.split("/")[2] == unpacked_id(built), worker.url
            yield Browser(context, worker, shots)
        finally:
            context.close()


def lookup(server: Server, url: str):
    answer = server.served.http.get("/bookmarks/lookup", params={"url": url})
    return answer.json() if answer.status_code == 200 else None


def test_shortcuts_actually_assigned_are_recorded_and_the_missing_one_reported(browser):
    commands = {c["name"]: c["shortcut"] for c in browser.run("() => chrome.commands.getAll()")}
    assert set(commands) == {"_execute_action", "quick-add", "toggle-star", "save-snapshot"}
    missing = sorted(name for name, key in commands.items() if not key)
    print("shortcuts after install:", commands)
    # What the extension reports is exactly what the browser left unassigned.
    assert sorted(browser.run("() => marksActions.unassignedCommands()")) == missing
    if missing:
        opened = browser.run(
            """async () => {
                 for (let i = 0; i < 300; i += 1) {  // wait for the tab the install opens
                   const tabs = await chrome.tabs.query({});
                   const found = tabs.find((t) => (t.url || "").includes("?unassigned="));
                   if (found) return found.url;
                   await new Promise((resolve) => setTimeout(resolve, 50));
                 }
                 return null;
               }"""
        )
        assert opened is not None and "quick-add" in opened
        options = next(p for p in browser.context.pages if "?unassigned=" in p.url)
        options.wait_for_selector("#unassigned:not([hidden])")
        text = options.inner_text("#unassigned-text")
        assert "did not assign" in text
        assert browser.shortcuts_page in options.inner_text("#unassigned")
        browser.shot(options, "options-unassigned")


def test_quick_add_star_and_the_badge(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    page, tab = browser.tab(f"{pages}/article/one")

    assert browser.run("(t) => marksActions.refreshBadge(t.id, t.url)", tab) == "unknown"
    assert browser.badge(tab["id"])[0] == ""

    result = browser.run("(t) => marksActions.quickAdd(t)", tab)
    assert result["status"] == "added"
    assert browser.badge(tab["id"])[0] == "+"
    stored = lookup(server, tab["url"])
    assert stored["title"] == "Page /article/one" and stored["starred"] is False

    assert browser.run("(t) => marksActions.refreshBadge(t.id, t.url)", tab) == "bookmarked"
    text, colour = browser.badge(tab["id"])
    assert text == "✓" and colour[:3] == [47, 125, 50]

    assert browser.run("(t) => marksActions.toggleStar(t)", tab)["status"] == "starred"
    assert lookup(server, tab["url"])["starred"] is True
    text, colour = browser.badge(tab["id"])
    assert text == "★" and colour[:3] == [184, 134, 11]
    assert browser.run("(t) => marksActions.toggleStar(t)", tab)["status"] == "unstarred"
    assert lookup(server, tab["url"])["starred"] is False

    # Quick add of a page already bookmarked says so and changes nothing.
    assert browser.run("(t) => marksActions.quickAdd(t)", tab)["status"] == "exists"
    page.close()


def test_star_adds_an_unknown_page_first(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    _, tab = browser.tab(f"{pages}/never/seen")
    assert browser.run("(t) => marksActions.toggleStar(t)", tab)["status"] == "starred"
    stored = lookup(server, tab["url"])
    assert stored is not None and stored["starred"] is True


def test_context_menu_actions(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    assert browser.run("() => marksActions.menuIds()") == [
        "add-page",
        "add-link",
        "add-selection",
        "star-page",
        "save-snapshot",
    ]
    _, tab = browser.tab(f"{pages}/menus/page")
    link = {"linkUrl": f"{pages}/linked/target", "linkText": " The linked target "}
    assert browser.run("([i, t]) => marksActions.menu('add-link', i, t)", [link, tab])[
        "status"
    ] == ("added")
    linked = lookup(server, f"{pages}/linked/target")
    assert linked["title"] == "The linked target"

    selection = {"selectionText": "Some words worth keeping"}
    result = browser.run("([i, t]) => marksActions.menu('add-selection', i, t)", [selection, tab])
    assert result["status"] == "added"
    assert lookup(server, tab["url"])["description"] == "Some words worth keeping"

    assert browser.run("([i, t]) => marksActions.menu('star-page', i, t)", [{}, tab])["status"] == (
        "starred"
    )
    assert lookup(server, tab["url"])["starred"] is True
    assert browser.run("([i, t]) => marksActions.menu('add-page', i, t)", [{}, tab])["status"] == (
        "exists"
    )


def test_server_down_keeps_quick_adds_and_sends_them_when_back(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    url = server.served.url
    server.stop()
    _, tab = browser.tab(f"{pages}/offline/add")
    result = browser.run("(t) => marksActions.quickAdd(t)", tab)
    assert result["status"] == "kept" and "not reachable" in result["message"]
    assert browser.badge(tab["id"])[0] == "…"
    assert browser.run("(t) => marksActions.refreshBadge(t.id, t.url)", tab) == "offline"
    assert len(browser.run("() => marksActions.pending()")) == 1

    server.start()
    assert server.served.url == url
    assert browser.run("() => marksActions.flushOutbox()") == {"sent": 1, "failed": 0, "left": 0}
    assert lookup(server, tab["url"])["title"] == "Page /offline/add"
    assert browser.run("() => marksActions.pending()") == []


def test_a_wrong_token_is_refused_and_said_in_one_line(browser, server, pages):
    browser.configure(server.served.url, "not-the-token")
    _, tab = browser.tab(f"{pages}/token/check")
    result = browser.run("(t) => marksActions.quickAdd(t)", tab)
    assert result["status"] == "failed" and "refused the token" in result["message"]
    assert lookup(server, tab["url"]) is None

    popup = browser.extension_page(f"popup.html?url={tab['url']}")
    popup.wait_for_selector("#status:not([hidden])")
    assert "refused the token" in popup.inner_text("#status")
    browser.shot(popup, "popup-wrong-token")


def test_popup_adds_edits_stars_searches_and_deletes(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    served = server.served
    served.add("https://docs.example/rust", title="The Rust book", tags=["rust/learning"])
    url = f"{pages}/popup/page"
    popup = browser.extension_page(f"popup.html?url={url}&title=Popup%20page")
    expect(popup.locator("#url")).not_to_have_value("")
    assert popup.input_value("#title") == "Popup page"
    assert popup.inner_text("#save") == "Add"
    shortcuts = popup.inner_text("#shortcuts")
    assert "popup:" in shortcuts and "star:" in shortcuts
    browser.shot(popup, "popup-new-page")

    popup.fill("#tags", "ru")
    expect(popup.locator("#tag-names option")).to_have_count(1)
    assert popup.eval_on_selector_all("#tag-names option", "os => os.map(o => o.value)") == [
        "rust/learning"
    ]
    popup.fill("#tags", "reading, rust/learning")
    popup.fill("#description", "<b>not html</b>")
    popup.click("#save")
    expect(popup.locator("#save")).to_have_text("Save")
    stored = lookup(server, url)
    assert stored["tags"] == ["reading", "rust/learning"]
    assert stored["description"] == "<b>not html</b>"

    popup.fill("#title", "Edited title")
    popup.click("#save")
    expect(popup.locator("#status")).to_have_text("Saved")
    assert lookup(server, url)["title"] == "Edited title"

    popup.click("#star")
    expect(popup.locator("#star")).to_have_attribute("aria-pressed", "true")
    assert lookup(server, url)["starred"] is True
    browser.shot(popup, "popup-bookmarked")

    popup.click("nav button[data-tab=search]")
    popup.fill("#search", "rust")
    popup.wait_for_selector("#search-results li")
    first = popup.inner_text("#search-results li")
    assert "The Rust book" in first
    assert popup.eval_on_selector("#search-results li", "li => li.querySelector('img') === null")
    browser.shot(popup, "popup-search")

    popup.click("nav button[data-tab=page]")
    popup.click("#delete")
    expect(popup.locator("#save")).to_have_text("Add")
    assert lookup(server, url) is None
    # Deleting moves it to marks' trash (issue 25, item 5), and the popup says so.
    expect(popup.locator("#status")).to_contain_text("Moved to the trash")
    assert [e["url"] for e in server.served.http.get("/trash").json()] == [url]


def test_popup_dates_tab_browses_recent_periods_and_years(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    served = server.served
    served.add("https://recent.example/today", title="Added today")
    popup = browser.extension_page(f"popup.html?url={pages}/dates")
    popup.click("nav button[data-tab=dates]")
    popup.wait_for_selector("#date-choices button")
    labels = popup.eval_on_selector_all("#date-choices button", "bs => bs.map(b => b.textContent)")
    assert labels[:6] == [
        "Today",
        "Yesterday",
        "This week",
        "Last week",
        "This month",
        "Last month",
    ]
    popup.click("#date-choices button >> text=Today")
    popup.wait_for_selector("#date-results li")
    assert "Added today" in popup.inner_text("#date-results")

    year = next(label for label in labels[6:] if label.endswith("(1)"))
    popup.click(f"#date-choices button >> text={year}")
    popup.wait_for_selector("#date-choices button >> text=↑ Back")
    months = popup.eval_on_selector_all("#date-choices button", "bs => bs.map(b => b.textContent)")
    assert any(label.endswith("(1)") for label in months[1:])
    assert "Added today" in popup.inner_text("#date-results")
    browser.shot(popup, "popup-dates")


def test_options_page_saves_and_tests_the_connection(browser, server):
    options = browser.extension_page("options.html")
    expect(options.locator("#server")).not_to_have_value("")
    assert options.input_value("#server") == "http://127.0.0.1:8000"
    options.fill("#server", server.served.url)
    options.fill("#token", server.served.token)
    options.click("#save")
    expect(options.locator("#result")).to_have_text("Saved")
    stored = browser.run("() => chrome.storage.local.get(['server', 'token'])")
    assert stored == {"server": server.served.url, "token": server.served.token}
    options.click("#test")
    expect(options.locator("#result")).to_have_text(re.compile(r"^Connected: 0 bookmarks"))
    browser.shot(options, "options")

    options.fill("#token", "wrong")
    options.click("#test")
    expect(options.locator("#result")).to_contain_text("refused the token")
    options.fill("#server", "not a url")
    options.click("#save")
    expect(options.locator("#result")).to_contain_text("not a URL")

    url = server.served.url
    server.stop()
    options.fill("#server", url)
    options.fill("#token", "anything")
    options.click("#test")
    expect(options.locator("#result")).to_contain_text("not reachable")


def test_visits_are_counted_only_when_asked(browser, server, pages):
    served = server.served
    url = f"{pages}/visited/page"
    served.add(url, title="Visited")
    browser.configure(served.url, served.token, countVisits=False)
    page, _ = browser.tab(url)
    page.reload()
    assert lookup(server, url)["visit_count"] == 0

    browser.configure(served.url, served.token, countVisits=True)
    page.reload()
    assert wait_until(lambda: lookup(server, url)["visit_count"] >= 1, timeout=15)


def test_popup_puts_the_page_in_the_reading_queue_with_a_priority(browser, server, pages):
    browser.configure(server.served.url, server.served.token)
    url = f"{pages}/queue/me"
    popup = browser.extension_page(f"popup.html?url={url}&title=Queue%20me")
    expect(popup.locator("#save")).to_have_text("Add")
    popup.select_option("#priority", "2")
    popup.click("#queue")
    expect(popup.locator("#status")).to_have_text("In the reading queue (priority 2)")
    (item,) = server.served.http.get("/queue").json()
    assert (item["url"], item["priority"], item["title"]) == (url, 2, "Queue me")
    popup.click("#queue")  # a second time: the server's reason, in one line
    expect(popup.locator("#status")).to_contain_text("already in the reading queue")


def test_popup_shows_bookmarklets_inert_and_dead_links_with_their_archived_copy(
    browser, server, pages
):
    """Issue 25: a `javascript:` bookmark found by search is text with a Copy button, never a
    link; a dead link with an archived copy says "dead; archived copy from DATE"."""
    browser.configure(server.served.url, server.served.token)
    archived = "http://web.archive.org/web/20200102030405/https://gone.example/"
    records = [
        {"url": "javascript:document.title='pwned';void(0)", "title": "zeppelin bookmarklet"},
        {"url": "https://gone.example/", "title": "zeppelin gone", "reachable": False,
         "archived_url": archived, "archived_at": "2020-01-02T03:04:05Z"},
    ]  # fmt: skip
    report = server.served.http.post("/import/json", json=records)
    assert report.json()["added"] == 2, report.text
    popup = browser.extension_page("popup.html?url=https://gone.example/&title=Gone")
    expect(popup.locator("#archived")).to_have_text("dead; archived copy from 2020-01-02")
    assert popup.locator("#archived a").get_attribute("href") == archived
    popup.click("nav button[data-tab=search]")
    popup.fill("#search", "zeppelin")
    expect(popup.locator("#search-results li")).to_have_count(2)
    assert popup.locator("#search-results a[href^='javascript' i]").count() == 0
    shown = popup.eval_on_selector_all(
        "#search-results li",
        "items => items.map(li => [li.querySelector('a, span.inert').tagName,"
        " li.querySelectorAll('button').length])",
    )
    assert sorted(shown) == [["A", 0], ["SPAN", 1]]
    browser.shot(popup, "popup-inert-and-archived")
