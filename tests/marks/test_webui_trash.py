"""The web UI's Undo toast and Trash view in Debian's chromium (Playwright) and firefox-esr
(WebDriver BiDi) against a live `marks serve`; every test runs in both
(tests/support/browserui.py). Screenshots of the toast and the Trash view are saved under the
test's temporary directory (`screenshots/`), one more when the test ends."""

from pathlib import Path

import pytest

from support.browserui import BROWSERS, expect, launch
from support.marksserve import Served


@pytest.fixture(scope="module", params=BROWSERS)
def browser(request, tmp_path_factory):
    with launch(request.param, tmp_path_factory.mktemp(request.param)) as launched:
        yield launched


@pytest.fixture
def page(browser, served: Served, tmp_path):
    opened = browser.new_page(viewport={"width": 1200, "height": 800})
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("dialog", lambda dialog: dialog.accept())  # the "Delete ...?" confirmation
    opened.goto(served.url + "/")
    opened.wait_for_selector("body[data-loaded=true]")
    yield opened
    shot(opened, tmp_path, "at-the-end")
    browser.close_page(opened)
    assert not errors, errors


def shot(page, tmp_path: Path, name: str) -> Path:
    (tmp_path / "screenshots").mkdir(exist_ok=True)
    path = tmp_path / "screenshots" / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def titles(page) -> list[str]:
    return page.locator("#list > li .title").all_text_contents()


def delete_from_the_editor(page, title: str) -> None:
    page.locator("#list > li", has_text=title).locator("button.edit").click()
    page.click("#edit-delete")


def test_undo_toast_after_a_delete_and_the_trash_view(page, served, tmp_path):
    alpha = served.add("https://alpha.example/", title="Alpha", tags=["keep/me"])
    served.add("https://beta.example/", title="Beta")
    served.http.post("/queue", json={"ids": [alpha["id"]]})
    page.reload()
    page.wait_for_selector("#list .title:text-is('Alpha')")
    page.wait_for_selector("#view-trash .trash-empty")  # "Nothing deleted."

    delete_from_the_editor(page, "Alpha")
    page.wait_for_selector("#toast .toast-undo")
    assert "Deleted “Alpha” (moved to the trash)" in page.text_content("#toast")
    page.wait_for_selector("#view-trash .trash-item:has-text('Alpha')")
    assert titles(page) == ["Beta"]
    assert shot(page, tmp_path, "undo-toast").stat().st_size > 0

    page.click("#toast .toast-undo")
    page.wait_for_selector("#toast:has-text('undid delete')")
    page.wait_for_selector("#list .title:text-is('Alpha')")
    page.wait_for_selector("#view-trash .trash-empty")
    assert served.http.get(f"/bookmarks/{alpha['id']}").json() == alpha
    assert [q["id"] for q in served.http.get("/queue").json()] == [alpha["id"]]

    delete_from_the_editor(page, "Alpha")
    delete_from_the_editor(page, "Beta")
    page.wait_for_selector("#view-trash .trash-item:has-text('Beta')")
    expect(page.locator("#view-trash .trash-item")).to_have_count(2)
    assert shot(page, tmp_path, "trash-view").stat().st_size > 0
    page.locator("#view-trash .trash-item", has_text="Alpha").locator(".trash-restore").click()
    page.wait_for_selector("#toast:has-text('restored Alpha')")
    page.wait_for_selector("#list .title:text-is('Alpha')")
    expect(page.locator("#view-trash .trash-item")).to_have_count(1)
    page.click("#view-trash .trash-empty-all")
    page.wait_for_selector("#view-trash .trash-empty")
    assert served.http.get("/trash").json() == []


def test_undo_toast_after_an_edit_puts_the_title_back(page, served, tmp_path):
    made = served.add("https://page.example/", title="Original title", tags=["a"])
    page.reload()
    page.locator("#list > li", has_text="Original title").locator("button.edit").click()
    page.locator("#edit-form [name=title]").fill("Overwritten")
    page.click("#edit-save")
    page.wait_for_selector("#toast:has-text('Saved “Overwritten”')")
    assert shot(page, tmp_path, "undo-toast-after-an-edit").stat().st_size > 0
    page.click("#toast .toast-undo")
    page.wait_for_selector("#list .title:text-is('Original title')")
    assert served.http.get(f"/bookmarks/{made['id']}").json() == made
