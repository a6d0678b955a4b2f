"""The browsers the web UI tests run in, behind one fixture layer: each test is written once.

`BROWSERS` parametrises a module-scoped `browser` fixture; `launch(name)` gives an object whose
`new_page()` opens an isolated page (a Playwright context in Chromium, a BiDi user context in
Firefox) with Playwright's page API, and `expect()` is Playwright's or its BiDi twin.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support import chromium_path
from support.bidi import Firefox
from support.firefoxpage import Expect, Locator, Page

BROWSERS = ["chromium", "firefox"]


class ChromiumPages:
    name = "chromium"

    def __init__(self, launched: Any) -> None:
        self.launched = launched

    def new_page(self, viewport: dict | None = None) -> Any:
        context = self.launched.new_context(viewport=viewport, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(15000)
        return page

    def close_page(self, page: Any) -> None:
        page.context.close()


class FirefoxPages:
    name = "firefox"

    def __init__(self, firefox: Firefox) -> None:
        self.firefox = firefox
        firefox.bidi.send("session.subscribe", {"events": ["browsingContext", "log"]})

    def new_page(self, viewport: dict | None = None) -> Page:
        user = self.firefox.bidi.send("browser.createUserContext")["userContext"]
        return Page(self.firefox.bidi, self.firefox.downloads, viewport, user_context=user)

    def close_page(self, page: Page) -> None:
        page.close()
        self.firefox.bidi.send("browser.removeUserContext", {"userContext": page.user_context})


@contextmanager
def launch(
    name: str,
    home: Path,
    *,
    chromium_args: list[str] | None = None,
    firefox_prefs: dict[str, Any] | None = None,
) -> Iterator[ChromiumPages | FirefoxPages]:
    """`name`'s browser; `chromium_args` / `firefox_prefs` say the same thing to each (for
    example a host name that resolves to loopback)."""
    if name == "chromium":
        from playwright.sync_api import sync_playwright

        path = chromium_path()
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=path, args=chromium_args or [])
            try:
                yield ChromiumPages(launched)
            finally:
                launched.close()
    else:
        firefox = Firefox(home / "firefox-profile", firefox_prefs)
        try:
            yield FirefoxPages(firefox)
        finally:
            firefox.close()


def expect(target: Any) -> Any:
    """Playwright's `expect` for its locators, the BiDi one for Firefox's."""
    if isinstance(target, Locator):
        return Expect(target)
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)
