"""The web UI in Debian's chromium (Playwright) and firefox-esr (WebDriver BiDi) against a live
`marks serve`; every test runs in both (tests/support/browserui.py).

Each test saves a screenshot of the views it visits under its temporary directory, and one more
when it ends (so a failure leaves a picture of what the page showed).
"""

import json
from pathlib import Path

import pytest

from support.browserui import BROWSERS, expect, launch
from support.marksserve import Served, start_marks
from support.servers import wait_until


@pytest.fixture(scope="module", params=BROWSERS)
def browser(request, tmp_path_factory):
    with launch(request.param, tmp_path_factory.mktemp(request.param)) as launched:
        yield launched


class UI:
    def __init__(self, page, served: Served, shots: Path) -> None:
        self.page = page
        self.served = served
        self.shots = shots
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self) -> None:
        self.page.goto(self.served.url + "/")
        self.page.wait_for_selector("body[data-loaded=true]")
        self.page.wait_for_selector("#view-collections li")

    def shot(self, name: str) -> Path:
        self.shots.mkdir(exist_ok=True)
        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def showing(self, view: str) -> list[str]:
        """Wait until the list shows `view` (the app marks it once painted); its titles."""
        self.page.wait_for_selector(f"#list[data-view={json.dumps(view)}]")
        return self.titles()

    def rows(self):
        return self.page.locator("#list > li")

    def titles(self) -> list[str]:
        return self.page.locator("#list > li .title").all_text_contents()


@pytest.fixture
def ui(browser, served, tmp_path):
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    view = UI(page, served, tmp_path / "screenshots")
    yield view
    view.shot("at-the-end")
    browser.close_page(page)
    assert not view.errors, view.errors


def seed(served: Served) -> None:
    records = [
        {"url": "https://pasta.example/", "title": "Cooking pasta", "description": "boil water",
         "tags": ["food/italian"], "added": "2023-05-17T10:00:00Z"},
        {"url": "https://rust.example/", "title": "Rust book", "tags": ["dev/rust"],
         "starred": True, "added": "2023-05-18T10:00:00Z",
         "last_visited": "2024-02-01T09:00:00Z", "visit_count": 2},
        {"url": "https://python.example/", "title": "Python docs", "tags": ["dev/python"],
         "added": "2024-01-02T10:00:00Z"},
        {"url": "https://loose.example/", "title": "No tags here", "added": "2024-03-04T10:00:00Z"},
    ]  # fmt: skip
    report = served.http.post("/import/json", content=json.dumps(records).encode()).json()
    assert report["added"] == 4


def test_the_list_pages_and_the_main_view(ui):
    for number in range(60):
        ui.served.add(f"https://many.example/{number}", title=f"page {number:02d}")
    ui.open()
    assert ui.rows().count() == 50
    assert ui.titles()[0] == "page 59"  # newest first
    ui.shot("list")
    ui.page.click("#more")
    expect(ui.rows()).to_have_count(60)  # (the page's CSP forbids eval'd predicates)
    assert ui.page.locator("#more").is_hidden()


def test_titles_descriptions_and_tags_are_text_never_html(ui):
    attack = '<img src=x onerror="window.__pwned = 1">'
    ui.served.add(
        "https://evil.example/", title=attack, description=attack, tags=[attack.replace(",", "")]
    )
    ui.open()
    row = ui.rows().first
    assert row.locator(".title").text_content() == attack
    assert row.locator(".description").text_content() == attack
    assert ui.page.locator("#list img").count() == 0
    ui.page.fill("#search", "evil")
    ui.page.wait_for_selector("#list .snippet")
    assert ui.page.locator("#list img").count() == 0
    assert ui.page.evaluate("window.__pwned") is None
    ui.shot("hostile-title")


def test_add_edit_and_delete_through_the_editor(ui):
    ui.open()
    ui.page.click("#add")
    form = ui.page.locator("#edit-form")
    form.locator("[name=url]").fill("https://new.example/page")
    form.locator("[name=title]").fill("A new page")
    form.locator("[name=tags]").fill("reading, dev/web")
    ui.shot("editor")
    form.locator("#edit-save").click()
    ui.page.wait_for_selector("#list .title:text-is('A new page')")
    made = ui.served.http.get(
        "/bookmarks/lookup", params={"url": "https://new.example/page"}
    ).json()
    assert made["tags"] == ["dev/web", "reading"]

    ui.page.click("#list > li >> text=Edit")
    form.locator("[name=title]").fill("Renamed page")
    form.locator("#edit-save").click()
    ui.page.wait_for_selector("#list .title:text-is('Renamed page')")
    assert ui.served.http.get(f"/bookmarks/{made['id']}").json()["title"] == "Renamed page"

    ui.page.click("#add")  # a duplicate URL: the server's reason is shown in the dialog
    form.locator("[name=url]").fill("https://new.example/page")
    form.locator("#edit-save").click()
    ui.page.wait_for_selector("#edit-error:has-text('already bookmarked')")
    ui.page.click("#edit-cancel")

    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.page.click("#list > li >> text=Edit")
    form.locator("#edit-delete").click()
    ui.page.wait_for_selector("#message:has-text('no bookmarks here')")
    assert ui.served.http.get(f"/bookmarks/{made['id']}").status_code == 404


def test_search_as_you_type_highlights_snippets(ui):
    seed(ui.served)
    ui.open()
    ui.page.keyboard.press("/")
    assert ui.page.evaluate("document.activeElement.id") == "search"
    ui.page.keyboard.type("past")
    ui.page.keyboard.type("a")
    assert ui.showing("search:pasta") == ["Cooking pasta"]
    assert ui.page.locator("#list mark").first.text_content().lower() == "pasta"
    ui.shot("search")
    ui.page.keyboard.press("Escape")
    assert len(ui.showing("All bookmarks")) == 4


def test_keyboard_moves_stars_and_edits(ui):
    seed(ui.served)
    ui.open()
    ui.page.keyboard.press("j")
    ui.page.keyboard.press("j")
    ui.page.keyboard.press("k")
    current = ui.page.locator("#list > li.current")
    assert current.locator(".title").text_content() == "No tags here"
    ui.page.keyboard.press("s")
    ui.page.wait_for_selector("#list > li.current .star.on")
    starred = ui.served.http.get("/bookmarks", params={"starred": 1}).json()["items"]
    assert {b["title"] for b in starred} == {"Rust book", "No tags here"}
    ui.page.keyboard.press("e")
    assert ui.page.locator("#editor").is_visible()
    assert ui.page.locator("#edit-form [name=title]").input_value() == "No tags here"
    ui.page.keyboard.press("Escape")
    ui.page.locator("#list > li.current .star").click()  # and by mouse, off again
    ui.page.wait_for_selector("#list > li.current .star:not(.on)")


def test_tag_tree_and_smart_collections(ui):
    seed(ui.served)
    ui.open()
    ui.page.wait_for_selector("#view-tags [data-tag='dev']")
    ui.page.click("#view-tags [data-tag='dev']")
    assert sorted(ui.showing("#dev")) == ["Python docs", "Rust book"]
    ui.shot("tags")
    ui.page.click("#view-tags [data-tag='dev/rust']")
    assert ui.showing("#dev/rust") == ["Rust book"]

    for name, title, expected in [
        ("starred", "Starred", ["Rust book"]),
        ("untagged", "Untagged", ["No tags here"]),
        ("unread", "Unread", ["No tags here", "Python docs", "Cooking pasta"]),
        ("recent", "Recently visited", ["Rust book"]),
    ]:
        ui.page.click(f"[data-nav='collection-{name}']")
        assert ui.showing(title) == expected, name
        ui.shot(f"collection-{name}")


def test_the_toggle_of_a_leaf_tag_lists_it_and_throws_nothing(ui):
    """A click on a leaf's toggle threw `TypeError: children is null` (issue 25)."""
    seed(ui.served)
    ui.open()
    ui.page.click("#view-tags [data-tag='dev'] .toggle")  # opens dev: its leaves show
    leaf = ui.page.locator("#view-tags [data-tag='dev/rust'] .toggle")
    leaf.evaluate("toggle => toggle.click()")  # empty, so no size to click at
    assert ui.showing("#dev/rust") == ["Rust book"]
    ui.shot("tags-leaf-toggle")
    # the `ui` fixture fails the test on any page error


def test_bookmarklets_are_copied_never_run_and_dead_links_show_their_archived_copy(ui):
    """Issue 25: a `javascript:` bookmark is text with a Copy button (no href that runs script);
    an `apt:` one too; a dead link with an archived copy says so and links to the copy."""
    bookmarklet = "javascript:document.title='pwned';void(0)"
    archived = "http://web.archive.org/web/20200102030405/https://gone.example/"
    records = [
        {"url": bookmarklet, "title": "Bookmarklet", "added": "2024-01-01T10:00:00Z"},
        {"url": "apt://flashplugin-installer", "title": "Flash", "added": "2024-01-02T10:00:00Z"},
        {"url": "https://gone.example/", "title": "Gone", "added": "2024-01-03T10:00:00Z",
         "reachable": False, "archived_url": archived, "archived_at": "2020-01-02T03:04:05Z"},
    ]  # fmt: skip
    report = ui.served.http.post("/import/json", content=json.dumps(records).encode()).json()
    assert report["added"] == 3 and report["invalid"] == 0, report
    ui.open()
    ui.page.wait_for_selector("#list > li")
    assert ui.page.locator("a[href^='javascript' i], a[href^='apt' i]").count() == 0
    rows = ui.page.eval_on_selector_all(
        "#list > li",
        "rows => rows.map(r => [r.querySelector('.title').tagName, r.querySelector('.title')"
        ".textContent, r.querySelector('button.copy') !== null])",
    )
    assert sorted(rows) == [
        ["A", "Gone", False], ["SPAN", "Bookmarklet", True], ["SPAN", "Flash", True],
    ]  # fmt: skip
    # The system clipboard is outside the page: what the page hands it is recorded instead.
    ui.page.evaluate(
        "() => { window.copied = null;"
        " navigator.clipboard.writeText = async (text) => { window.copied = text; }; }"
    )
    ui.page.eval_on_selector_all(
        "#list > li",
        "rows => { const row = rows.find(r => r.textContent.includes('Bookmarklet'));"
        " row.querySelector('.title').click(); row.querySelector('button.copy').click(); }",
    )
    ui.page.wait_for_function("() => window.copied !== null")
    assert ui.page.evaluate("() => window.copied") == bookmarklet
    assert ui.page.evaluate("() => document.title") != "pwned"  # clicking the text ran nothing
    assert ui.page.text_content("#list > li .archived") == "dead; archived copy from 2020-01-02"
    assert ui.page.locator("#list > li .archived a").get_attribute("href") == archived
    ui.shot("inert-and-archived")


def test_dates_walk_year_month_day(ui):
    seed(ui.served)
    ui.open()
    ui.page.click("[data-nav='dates-added']")
    ui.page.click(".date-field[data-field='added'] [data-period='2023']")
    assert len(ui.showing("Added 2023")) == 2
    ui.page.click("[data-period='2023-05']")
    ui.page.click("[data-period='2023-05-17']")
    assert ui.showing("Added 2023-05-17") == ["Cooking pasta"]
    ui.shot("dates")
    ui.page.click("[data-nav='dates-visited']")
    ui.page.click(".date-field[data-field='visited'] [data-period='2024']")
    assert ui.showing("Visited 2024") == ["Rust book"]


def test_bulk_tag_import_and_export(ui, tmp_path):
    seed(ui.served)
    ui.open()
    boxes = ui.page.locator("#list > li input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    ui.page.fill("#bulk-tag", "later")
    ui.page.click("#bulk-apply")
    ui.page.wait_for_selector("#message:has-text('tagged 2')")
    tagged = ui.served.http.get("/bookmarks", params={"tag": "later"}).json()["items"]
    assert len(tagged) == 2

    upload = tmp_path / "urls.txt"
    upload.write_text("https://imported.example/one\nhttps://imported.example/two\nnot a url\n")
    ui.page.click("#transfer summary")
    ui.page.select_option("#import-format", "text")
    ui.page.set_input_files("#import-file", str(upload))
    ui.page.click("#import-form button[type=submit]")
    ui.page.wait_for_selector("#import-report:has-text('added 2')")
    assert "invalid 1" in ui.page.text_content("#import-report")
    ui.shot("import")

    with ui.page.expect_download() as waiting:
        ui.page.click("[data-export=json]")
    saved = tmp_path / "export.json"
    waiting.value.save_as(saved)
    assert len(json.loads(saved.read_text())) == 6


def test_the_first_list_is_asked_for_once_and_shown(ui):
    # first.js asks for the list's first page while the modules load and app.js shows that
    # answer: the server sees one request for it, and the page shows its bookmarks.
    seed(ui.served)
    before = len(ui.served.process.lines)
    ui.open()
    assert sorted(ui.showing("All bookmarks")) == [
        "Cooking pasta", "No tags here", "Python docs", "Rust book"]  # fmt: skip
    ui.page.locator("#view-tags li").first.wait_for()  # the sidebar (after the list) is there too
    lines = ui.served.process.lines
    # The access log's line comes after the answer; the sidebar's tag tree is asked after the list.
    assert wait_until(lambda: any('"GET /tags?tree=1 ' in line for line in lines[before:]))
    asked = [line for line in lines[before:] if '"GET /bookmarks?' in line]
    assert len(asked) == 1 and "limit=50&offset=0" in asked[0], asked
    ui.shot("first-list")


def test_the_ui_asks_for_the_token_once_when_the_server_needs_one(browser, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("ui-test-token-0123456789")
    process = start_marks(
        tmp_path / "l.db", tmp_path, "--host", "0.0.0.0", "--token-file", str(token_file)
    )
    try:
        port = process.url.rsplit(":", 1)[1]
        page = browser.new_page()
        asked: list[str] = []

        def answer(dialog) -> None:
            asked.append(dialog.message)
            dialog.accept("ui-test-token-0123456789")

        page.on("dialog", answer)
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("body[data-loaded=true]", timeout=15000)
        page.reload()
        page.wait_for_selector("body[data-loaded=true]", timeout=15000)
        assert len(asked) == 1 and "token" in asked[0]
        page.screenshot(path=str(tmp_path / "token.png"))
        browser.close_page(page)
    finally:
        process.stop()


def test_the_reading_queue_view(ui):
    ids = [ui.served.add(f"https://read.example/{n}", title=f"Read {n}")["id"] for n in range(3)]
    ui.served.http.post("/queue", json={"ids": [ids[0]], "priority": 3})
    ui.open()
    queue = ui.page.locator("#view-queue")
    queue.locator(".queue-item").first.wait_for()
    assert queue.locator(".queue-next strong").text_content() == "Read 0"

    # Queue two more from the list, with the selection tools.
    for title in ("Read 1", "Read 2"):
        ui.page.locator("#list > li", has_text=title).locator("input[type=checkbox]").check()
    ui.page.click("#bulk-queue")
    ui.page.wait_for_selector("#message:has-text('queued 2 bookmark(s)')")
    queue = ui.page.locator("#view-queue")
    expect(queue.locator(".queue-item")).to_have_count(3)

    # Priority 1 moves "Read 2" to the front; progress on "Read 1" shows in its row.
    item = queue.locator(f".queue-item[data-id='{ids[2]}']")
    item.locator(".queue-priority").select_option("1")
    ui.page.wait_for_selector("#view-queue .queue-next strong:text-is('Read 2')")
    slider = queue.locator(f".queue-item[data-id='{ids[1]}'] .queue-progress")
    slider.fill("40")
    ui.page.wait_for_selector(f"#view-queue .queue-item[data-id='{ids[1]}'] .count:text-is('40%')")
    ui.shot("queue")
    stats = ui.served.http.get("/queue/stats").json()
    assert stats["in_progress"] == 1 and stats["by_priority"]["1"] == 1

    # Progress 100 completes an item: it leaves the queue and counts as completed.
    queue.locator(f".queue-item[data-id='{ids[2]}'] .queue-progress").fill("100")
    ui.page.wait_for_selector("#view-queue .queue-stats:has-text('1 completed')")
    assert [i["id"] for i in ui.served.http.get("/queue").json()] == [ids[1], ids[0]]
    queue.locator(f".queue-item[data-id='{ids[0]}'] .queue-remove").click()
    ui.page.wait_for_selector(f"#view-queue .queue-item[data-id='{ids[0]}']", state="detached")
    assert [i["id"] for i in ui.served.http.get("/queue").json()] == [ids[1]]


@pytest.fixture
def checking(browser, tmp_path):
    """A UI on a server whose link checks give up after 2 s (the slow page takes 5), local pages."""
    import os
    import subprocess

    from support.marksrun import MARKS
    from support.websites import Websites

    homes = {
        f"XDG_{kind}_HOME": str(tmp_path / kind.lower()) for kind in ("CONFIG", "DATA", "STATE")
    }
    for key, value in (("health_timeout", "2"), ("health_retries", "0")):
        done = subprocess.run([MARKS, "config", "set", key, value], env={**os.environ, **homes},
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
    with Websites(hosts=2, slow_seconds=5) as web:
        served = Served(start_marks(tmp_path / "h.db", tmp_path), tmp_path / "h.db", tmp_path)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        view = UI(page, served, tmp_path / "screenshots")
        view.web = web
        try:
            yield view
        finally:
            view.shot("at-the-end")
            browser.close_page(page)
            served.close()
    assert not view.errors, view.errors


def test_the_health_view_runs_a_check_and_follows_it_to_the_end(checking):
    ui, web = checking, checking.web
    for title, url in (
        ("Fine page", web.url("/ok")),
        ("Gone page", web.url("/status/404")),
        ("Slow page", web.url("/slow", 2)),
        ("Closed port", web.closed_url),
    ):
        ui.served.add(url, title=title)  # fmt: skip
    ui.open()
    health = ui.page.locator("#view-health")
    expect(health.locator(".health-unchecked")).to_have_text("4 never checked")
    assert health.locator("[data-nav=health-broken] .count").text_content() == "0"

    ui.page.click("#check-links")
    # The slow page keeps the check running for a second: the view shows it under way...
    ui.page.wait_for_selector("#view-health .health-run[data-state=running]")
    assert "checking:" in health.locator(".health-status").text_content()
    ui.shot("health-running")
    # ...then done, with the counts, the list and the collections refreshed.
    ui.page.wait_for_selector("#view-health .health-run[data-state=done]", timeout=30000)
    expect(health.locator(".health-status")).to_contain_text("done: 4 of 4")
    expect(health.locator(".health-unchecked")).to_have_text("0 never checked")
    expect(health.locator(".health-unconfirmed")).to_have_text("3 not yet confirmed")
    assert health.locator("[data-nav=health-broken] .count").text_content() == "3"
    broken = ui.page.locator("[data-nav=collection-broken] .count")
    assert broken.text_content() == "3"
    ui.shot("health")

    health.locator("[data-nav=health-broken]").click()
    assert sorted(ui.showing("Broken links")) == ["Closed port", "Gone page", "Slow page"]

    # With bookmarks selected, only those are checked.
    ui.page.locator("#list > li", has_text="Gone page").locator("input[type=checkbox]").check()
    ui.page.click("#check-links")
    expect(health.locator(".health-status")).to_contain_text("done: 1 of 1")
    gone = next(
        b for b in ui.served.http.get("/bookmarks").json()["items"] if b["title"] == "Gone page"
    )
    assert len(ui.served.http.get(f"/bookmarks/{gone['id']}/health").json()) == 2

    # A check started elsewhere (here through the API) is followed instead of refused.
    slow = next(
        b for b in ui.served.http.get("/bookmarks").json()["items"] if b["title"] == "Slow page"
    )
    elsewhere = ui.served.http.post("/bookmarks/health", json={"ids": [slow["id"]]}).json()["id"]
    ui.page.click("#check-links")
    ui.page.wait_for_selector(
        f"#view-health .health-run[data-check='{elsewhere}'][data-state=done]"
    )
    assert ui.served.http.get(f"/bookmarks/health/{elsewhere}").json()["by_result"] == {
        "timeout": 1
    }
