"""The Firefox build of the extension in firefox-esr, installed with BiDi `webExtension.install`.

It offers what the Chromium fixture of tests/extension offers (`run`, `configure`, `tab`,
`badge`, `extension_page`, `shot`, `context.pages`), so each extension test is written once. The
extension's UUID is fixed in the profile's prefs, so its pages open at moz-extension://UUID/...;
One Firefox serves a test module; each test installs the extension and removes it at its end.
`run` evaluates in one of its pages with the background page's `marksActions` in scope (the same
functions the menus, shortcuts and popup call).
"""

import contextlib
import json
from pathlib import Path
from typing import Any

from support.bidi import BiDiError, Firefox
from support.firefoxpage import Page

ADDON_ID = "marks-extension@marks.invalid"
UUID = "6d1f5e0a-7c1b-4d6e-9a51-3b1f0c2d4e5f"


class _Tabs:
    """`browser.context.pages`: every open tab, as pages."""

    def __init__(self, owner: "FirefoxExtension") -> None:
        self.owner = owner

    @property
    def pages(self) -> list[Page]:
        tree = self.owner.firefox.bidi.send("browsingContext.getTree", {"maxDepth": 0})
        known = {page.context: page for page in self.owner.opened}
        return [
            known.get(c["context"]) or Page.attach(self.owner.firefox.bidi, c["context"])
            for c in tree["contexts"]
        ]


def extension_firefox(home: Path, prefs: dict[str, Any] | None = None) -> Firefox:
    """A firefox-esr for extension tests: the add-on's UUID fixed (and kept across reinstalls),
    moz-extension:// pages allowed to BiDi, prompt and log events subscribed; `prefs` added."""
    firefox = Firefox(
        home / "firefox-profile",
        {
            "extensions.webextensions.uuids": json.dumps({ADDON_ID: UUID}),
            "extensions.webextensions.keepUuidOnUninstall": True,
            **(prefs or {}),
        },
        system_access=True,
    )
    firefox.bidi.send("session.subscribe", {"events": ["browsingContext", "log"]})
    return firefox


class FirefoxExtension:
    """The extension installed afresh in a running Firefox for one test, and removed after it
    (its storage goes with it), with every tab the test opened closed."""

    name = "firefox"
    shortcuts_page = "about:addons"

    def __init__(self, archive: Path, firefox: Firefox, shots: Path) -> None:
        self.archive = archive
        self.firefox = firefox
        self.shots = shots
        self.extension_id = UUID
        self.opened: list[Page] = []
        self.context = _Tabs(self)

    def __enter__(self) -> "FirefoxExtension":
        bidi = self.firefox.bidi
        installed = bidi.send(
            "webExtension.install",
            {"extensionData": {"type": "archivePath", "path": str(self.archive)}},
        )
        assert installed["extension"] == ADDON_ID, installed
        try:
            self.runner = self._open(f"moz-extension://{UUID}/options.html?test-runner")
            self.runner._wait(
                lambda: self.runner.evaluate(
                    "async () => !!(await browser.runtime.getBackgroundPage())?.marksActions"
                ),
                30,
                "the background page's marksActions",
            )
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        bidi = self.firefox.bidi
        bidi.send("webExtension.uninstall", {"extension": ADDON_ID})
        blank = bidi.send("browsingContext.create", {"type": "tab"})["context"]
        for page in self.opened:
            page.close()
        for tab in bidi.send("browsingContext.getTree", {"maxDepth": 0})["contexts"]:
            if tab["context"] != blank:
                with contextlib.suppress(BiDiError):
                    bidi.send("browsingContext.close", {"context": tab["context"]})

    def _open(self, url: str, viewport: dict | None = None) -> Page:
        page = Page(self.firefox.bidi, self.firefox.downloads, viewport)
        self.opened.append(page)
        page.goto(url)
        return page

    def run(self, script: str, arg: Any = None) -> Any:
        return self.runner.evaluate(
            "async (arg) => { const background = await browser.runtime.getBackgroundPage();"
            " const marksActions = background.marksActions;"
            f" return await ({script})(arg); }}",
            arg,
        )

    def configure(self, server_url: str, token: str, **extra: Any) -> None:
        self.run(
            "(values) => chrome.storage.local.set(values)",
            {"server": server_url, "token": token, **extra},
        )

    def tab(self, url: str) -> tuple[Page, dict]:
        page = self._open(url)
        tab = self.run(
            "async (url) => (await chrome.tabs.query({})).find((t) => t.url === url)", url
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

    def extension_page(self, path: str) -> Page:
        viewport = {"width": 380, "height": 460} if path.startswith("popup.html") else None
        return self._open(f"moz-extension://{UUID}/{path}", viewport)

    def shot(self, page: Page, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}-firefox.png"), full_page=True)
