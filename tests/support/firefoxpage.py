"""Playwright's page API, the part the browser tests use, over WebDriver BiDi for Firefox.

The web UI and extension tests are written once against Playwright's names (`page.click`,
`page.locator(...).count()`, `expect(locator).to_have_text(...)`); in Chromium they get Playwright
itself, in Firefox these classes. Selectors are CSS plus the three Playwright forms the tests use:
`css:text-is('x')`, `css:has-text('x')` and `scope >> text=x`. Clicks and key presses are real
input (BiDi `input.performActions`), file choosers get real files (`input.setFiles`), prompts
are answered through `browsingContext.handleUserPrompt`. Every wait polls a condition in the page.
"""

import base64
import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from support.bidi import BiDiError, Connection

# Finds the elements of a selector chain; `steps` are [kind, value] pairs (css / text / nth).
_FIND = r"""
const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
function part(scope, sel) {
  sel = sel.trim();
  const within = (css) => {
    const found = [...scope.querySelectorAll(css)];
    if (scope.nodeType === 1 && scope.matches(css)) found.unshift(scope);
    return found;
  };
  if (sel.startsWith("text=")) {
    const want = sel.slice(5).replace(/^(["'])(.*)\1$/, "$2").toLowerCase();
    const has = (e) => norm(e.textContent).toLowerCase().includes(want);
    return within("*").filter((e) => has(e) && ![...e.children].some(has));
  }
  const m = sel.match(/^(.*?):(text-is|has-text)\((["'])(.*)\3\)$/);
  let found = [...scope.querySelectorAll(m ? m[1] : sel)];
  if (m && m[2] === "text-is") found = found.filter((e) => norm(e.textContent) === m[4]);
  if (m && m[2] === "has-text")
    found = found.filter((e) => norm(e.textContent).toLowerCase().includes(m[4].toLowerCase()));
  return found;
}
function find(steps) {
  let found = [document];
  for (const [kind, value] of steps) {
    if (kind === "css") {
      const next = [];
      for (const scope of found)
        for (const chunk of value.split(" >> ").reduce((scopes, sel) =>
          scopes.flatMap((s) => part(s, sel)), [scope])) next.push(chunk);
      found = [...new Set(next)];
    } else if (kind === "has_text") {
      found = found.filter((e) => norm(e.textContent).toLowerCase().includes(value.toLowerCase()));
    } else if (kind === "nth") {
      const one = value < 0 ? found[found.length + value] : found[value];
      found = one ? [one] : [];
    }
  }
  return found;
}
const visible = (e) => !!e && e.nodeType === 1
  && !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length)
  && getComputedStyle(e).visibility !== "hidden";
"""

_KEYS = {
    "Escape": "\ue00c",
    "Enter": "\ue007",
    "Tab": "\ue004",
    "Backspace": "\ue003",
    "ArrowDown": "\ue015",
    "ArrowUp": "\ue013",
    "ArrowLeft": "\ue012",
    "ArrowRight": "\ue014",
}


# What BiDi answers when a found element left the page or its layout before the click.
_ELEMENT_GONE = ("no such node", "stale element", "is not displayed", "out of bounds")


class TimeoutError(AssertionError):
    pass


class Dialog:
    def __init__(self, page: "Page", params: dict) -> None:
        self.page = page
        self.type = params.get("type")
        self.message = params.get("message", "")

    def accept(self, text: str | None = None) -> None:
        params: dict[str, Any] = {"context": self.page.context, "accept": True}
        if text is not None:
            params["userText"] = text
        self.page.bidi.send("browsingContext.handleUserPrompt", params)

    def dismiss(self) -> None:
        self.page.bidi.send(
            "browsingContext.handleUserPrompt", {"context": self.page.context, "accept": False}
        )


class Download:
    def __init__(self, folder: Path, before: set[str]) -> None:
        self.folder = folder
        self.before = before
        self.path: Path | None = None

    def _arrived(self) -> bool:
        names = {p.name for p in self.folder.glob("*")} - self.before
        done = [n for n in names if not n.endswith(".part") and f"{n}.part" not in names]
        if done and not [n for n in names if n.endswith(".part")]:
            self.path = self.folder / sorted(done)[0]
            return self.path.stat().st_size > 0
        return False

    def save_as(self, target: Path | str) -> None:
        shutil.copyfile(self.path, target)  # type: ignore[arg-type]


class Response:
    """What `goto` answers: the document's HTTP status (its navigation timing entry)."""

    def __init__(self, status: int) -> None:
        self.status = status


class _Waiting:
    value: Any = None


class Keyboard:
    def __init__(self, page: "Page") -> None:
        self.page = page

    def _keys(self, keys: list[str]) -> None:
        actions = []
        for key in keys:
            actions += [{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]
        self.page.bidi.send(
            "input.performActions",
            {"context": self.page.context,
             "actions": [{"type": "key", "id": "keyboard", "actions": actions}]},
        )  # fmt: skip

    def press(self, key: str) -> None:
        self._keys([_KEYS.get(key, key)])

    def type(self, text: str) -> None:
        self._keys(list(text))


class Locator:
    def __init__(self, page: "Page", steps: list) -> None:
        self.page = page
        self.steps = steps

    def locator(self, selector: str, has_text: str | None = None) -> "Locator":
        steps = [*self.steps, ["css", selector]]
        return Locator(self.page, steps + ([["has_text", has_text]] if has_text else []))

    @property
    def first(self) -> "Locator":
        return self.nth(0)

    def nth(self, index: int) -> "Locator":
        return Locator(self.page, [*self.steps, ["nth", index]])

    def _all(self, body: str, arg: Any = None) -> Any:
        """Runs `body` with `found` (the matching elements) and `arg` in scope."""
        return self.page._run(
            f"(input) => {{ {_FIND}; const found = find(input.steps);"
            f" const arg = input.arg; {body} }}",
            {"steps": self.steps, "arg": arg},
        )

    def _one(self, body: str, arg: Any = None, *, visible: bool = False) -> Any:
        """Waits until the first match exists (and is visible if asked); runs `body` on it, `e`."""
        check = "visible(found[0])" if visible else "found.length > 0"
        script = (
            f"if (!({check})) return {{waiting: true}}; const e = found[0];"
            f" return {{value: (() => {{ {body} }})()}};"
        )
        deadline = time.monotonic() + self.page.timeout
        while True:
            answer = self._all(script, arg)
            if not answer.get("waiting"):
                return answer.get("value")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {'visible ' if visible else ''}element for {self.steps}")
            time.sleep(0.05)

    def _element(self) -> dict:
        """The first (visible) match as a BiDi shared reference, scrolled into view."""
        self._one("return true;", visible=True)
        answer = self.page.bidi.send(
            "script.callFunction",
            {
                "functionDeclaration": f"(steps) => {{ {_FIND};"
                " const e = find(JSON.parse(steps))[0];"
                " e.scrollIntoView({block: 'center', inline: 'center'}); return e; }",
                "arguments": [{"type": "string", "value": json.dumps(self.steps)}],
                "awaitPromise": True,
                "target": {"context": self.page.context},
            },
        )
        return {"sharedId": answer["result"]["sharedId"]}

    def count(self) -> int:
        return self._all("return found.length;")

    def all_text_contents(self) -> list[str]:
        return self._all("return found.map((e) => e.textContent);")

    def text_content(self) -> str:
        return self._one("return e.textContent;")

    def inner_text(self) -> str:
        return self._one("return e.innerText;")

    def input_value(self) -> str:
        return self._one("return e.value;")

    def get_attribute(self, name: str) -> str | None:
        return self._one("return e.getAttribute(arg);", name)

    def is_visible(self) -> bool:
        return self._all("return visible(found[0]);")

    def is_hidden(self) -> bool:
        return not self.is_visible()

    def is_checked(self) -> bool:
        return self._one("return e.checked;")

    def wait_for(self, state: str = "visible", timeout: float | None = None) -> None:
        conditions = {
            "visible": "visible(found[0])",
            "attached": "found.length > 0",
            "detached": "found.length === 0",
            "hidden": "!visible(found[0])",
        }
        self.page._wait(lambda: self._all(f"return {conditions[state]};"), timeout, self.steps)

    def click(self) -> None:
        """As Playwright: if the page replaced or hid the element between finding it and
        clicking it (a list repainting), find it again until the page timeout."""
        deadline = time.monotonic() + self.page.timeout
        while True:
            try:
                return self._click_once()
            except BiDiError as error:
                gone = any(word in str(error) for word in _ELEMENT_GONE)
                if not gone or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def _ready_for_click(self) -> bool:
        """As Playwright's actionability check: the element has not moved over two animation
        frames (a dialog growing and re-centring as its content arrives) and is what a click at
        its centre hits (no overlay above it)."""
        answer = self.page.bidi.send(
            "script.callFunction",
            {
                "functionDeclaration": f"async (steps) => {{ {_FIND};"
                " const e = find(JSON.parse(steps))[0]; if (!e) return false;"
                " e.scrollIntoView({block: 'center', inline: 'center'});"
                " const frame = () => new Promise((done) => requestAnimationFrame(() => done()));"
                " const before = e.getBoundingClientRect(); await frame(); await frame();"
                " const after = e.getBoundingClientRect();"
                " if (['x', 'y', 'width', 'height'].some((k) => before[k] !== after[k]))"
                " return false;"
                " const hit = document.elementFromPoint(after.x + after.width / 2,"
                " after.y + after.height / 2);"
                " return !!hit && (hit === e || e.contains(hit)); }",
                "arguments": [{"type": "string", "value": json.dumps(self.steps)}],
                "awaitPromise": True,
                "target": {"context": self.page.context},
            },
        )
        return bool(answer["result"].get("value"))

    def _click_once(self) -> None:
        self._one("return true;", visible=True)
        self.page._wait(self._ready_for_click, None, f"{self.steps} to stand still, uncovered")
        element = self._element()
        self.page.bidi.send(
            "input.performActions",
            {"context": self.page.context, "actions": [{
                "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                "actions": [
                    {"type": "pointerMove", "x": 0, "y": 0,
                     "origin": {"type": "element", "element": element}},
                    {"type": "pointerDown", "button": 0},
                    {"type": "pointerUp", "button": 0},
                ],
            }]},
        )  # fmt: skip

    def check(self) -> None:
        if not self.is_checked():
            self.click()
        self.page._wait(self.is_checked, None, self.steps)

    def fill(self, value: str) -> None:
        """As Playwright: focus, replace the value, fire `input` (and `change`)."""
        self._one(
            "e.focus(); e.value = arg;"
            " e.dispatchEvent(new Event('input', {bubbles: true}));"
            " e.dispatchEvent(new Event('change', {bubbles: true})); return true;",
            value,
            visible=True,
        )

    def select_option(self, value: str) -> None:
        self._one(
            "e.value = arg; e.dispatchEvent(new Event('input', {bubbles: true}));"
            " e.dispatchEvent(new Event('change', {bubbles: true})); return true;",
            value,
            visible=True,
        )

    def set_input_files(self, path: str) -> None:
        self._one("return true;")
        answer = self.page.bidi.send(
            "script.callFunction",
            {
                "functionDeclaration": f"(steps) => {{ {_FIND};"
                " return find(JSON.parse(steps))[0]; }",
                "arguments": [{"type": "string", "value": json.dumps(self.steps)}],
                "awaitPromise": True,
                "target": {"context": self.page.context},
            },
        )
        self.page.bidi.send(
            "input.setFiles",
            {"context": self.page.context,
             "element": {"sharedId": answer["result"]["sharedId"]}, "files": [str(path)]},
        )  # fmt: skip

    def evaluate(self, script: str, arg: Any = None) -> Any:
        return self._one(f"return ({script})(e, arg);", arg)

    def evaluate_all(self, script: str, arg: Any = None) -> Any:
        return self._all(f"return ({script})(found, arg);", arg)


class Page:
    """One Firefox tab (a BiDi top-level browsing context)."""

    def __init__(
        self,
        bidi: Connection,
        downloads: Path,
        viewport: dict | None = None,
        user_context: str = "default",
    ) -> None:
        self.bidi = bidi
        self.downloads = downloads
        self.user_context = user_context
        self.context = bidi.send(
            "browsingContext.create", {"type": "tab", "userContext": user_context}
        )["context"]
        self.timeout = 15.0
        self.keyboard = Keyboard(self)
        self._handlers: dict[str, list[Callable]] = {"dialog": [], "pageerror": []}
        self._lock = threading.Lock()
        bidi.on("browsingContext.userPromptOpened", self._prompt)
        bidi.on("log.entryAdded", self._log)
        if viewport:
            self.set_viewport_size(viewport)

    @classmethod
    def attach(cls, bidi: Connection, context: str) -> "Page":
        """A page for a tab the browser opened itself (no events: only for reading it)."""
        page = cls.__new__(cls)
        page.bidi, page.context, page.timeout = bidi, context, 15.0
        page.keyboard = Keyboard(page)
        page._handlers = {"dialog": [], "pageerror": []}
        return page

    # -- events ---------------------------------------------------------------------------
    def _prompt(self, params: dict) -> None:
        if params.get("context") != self.context:
            return
        dialog = Dialog(self, params)
        handlers = list(self._handlers["dialog"])
        if not handlers:
            dialog.dismiss()  # as Playwright does with an unhandled dialog
        for handler in handlers:
            handler(dialog)

    def _log(self, params: dict) -> None:
        source = params.get("source", {})
        if params.get("type") == "javascript" and source.get("context") == self.context:
            for handler in list(self._handlers["pageerror"]):
                handler(params.get("text", ""))

    def on(self, event: str, handler: Callable) -> None:
        self._handlers[event].append(handler)

    def once(self, event: str, handler: Callable) -> None:
        def one(value: Any) -> None:
            self._handlers[event].remove(one)
            handler(value)

        self._handlers[event].append(one)

    # -- pages ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._run("() => location.href")

    def set_default_timeout(self, milliseconds: float) -> None:
        self.timeout = milliseconds / 1000

    def set_viewport_size(self, size: dict) -> None:
        self.bidi.send(
            "browsingContext.setViewport",
            {
                "context": self.context,
                "viewport": {"width": size["width"], "height": size["height"]},
            },
        )

    def goto(self, url: str) -> Response:
        # "interactive", then the load event polled: Firefox fails a "complete" wait when a
        # frame in the page is refused (X-Frame-Options), though the page itself loaded.
        self.bidi.send(
            "browsingContext.navigate",
            {"context": self.context, "url": url, "wait": "interactive"},
        )
        self.wait_for_load_state()
        return Response(
            self._run("() => performance.getEntriesByType('navigation')[0]?.responseStatus ?? 0")
        )

    @property
    def main_frame(self) -> "Page":
        return self

    @property
    def frames(self) -> list["Page"]:
        """This page and the frames in it (children of its browsing context)."""
        tree = self.bidi.send("browsingContext.getTree", {"root": self.context})["contexts"]
        found: list[Page] = [self]
        pending = list(tree[0].get("children") or [])
        while pending:
            child = pending.pop(0)
            found.append(Page.attach(self.bidi, child["context"]))
            pending += child.get("children") or []
        return found

    def wait_for_load_state(self) -> None:
        self._wait(lambda: self._run("() => document.readyState") == "complete", None, "load")

    def wait_for_function(self, expression: str, timeout: float | None = None) -> None:
        self._wait(
            lambda: self.evaluate(expression),
            None if timeout is None else timeout / 1000,
            expression,
        )

    def reload(self) -> None:
        self.bidi.send("browsingContext.reload", {"context": self.context, "wait": "complete"})

    def close(self) -> None:
        self.bidi.off("browsingContext.userPromptOpened", self._prompt)
        self.bidi.off("log.entryAdded", self._log)
        with suppress(BiDiError):  # already closed by the page itself
            self.bidi.send("browsingContext.close", {"context": self.context})

    def screenshot(self, path: str, full_page: bool = False) -> None:
        answer = self.bidi.send(
            "browsingContext.captureScreenshot",
            {"context": self.context, "origin": "document" if full_page else "viewport"},
        )
        Path(path).write_bytes(base64.b64decode(answer["data"]))

    # -- scripts ----------------------------------------------------------------------------
    def _run(self, function: str, arg: Any = None) -> Any:
        """Calls a JS function (text) with `arg`; its JSON-able result, back in Python."""
        answer = self.bidi.send(
            "script.callFunction",
            {
                "functionDeclaration": "async (input) => { const value = await (" + function
                + ")(JSON.parse(input));"
                " return value === undefined ? 'null' : JSON.stringify(value); }",
                "arguments": [{"type": "string", "value": json.dumps(arg)}],
                "awaitPromise": True,
                "userActivation": True,
                "target": {"context": self.context},
            },
        )  # fmt: skip
        result = answer["result"]
        if answer.get("type") == "exception":
            raise BiDiError(answer["exceptionDetails"]["text"])
        return json.loads(result["value"])

    def evaluate(self, script: str, arg: Any = None) -> Any:
        """As Playwright: a function is called with `arg`, anything else is an expression."""
        if re.match(r"^\s*(async\s*)?(\([^)]*\)|\w+)\s*=>|^\s*(async\s+)?function\b", script):
            return self._run(script, arg)
        return self._run(f"() => ({script})")

    def _wait(self, ready: Callable[[], Any], timeout: float | None, what: Any) -> None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.05)

    # -- Playwright's page-level shortcuts -------------------------------------------------
    def locator(self, selector: str, has_text: str | None = None) -> Locator:
        return Locator(self, []).locator(selector, has_text)

    def wait_for_selector(
        self, selector: str, state: str = "visible", timeout: float | None = None
    ):
        self.locator(selector).wait_for(state, None if timeout is None else timeout / 1000)

    def click(self, selector: str) -> None:
        self.locator(selector).click()

    def fill(self, selector: str, value: str) -> None:
        self.locator(selector).fill(value)

    def check(self, selector: str) -> None:
        self.locator(selector).check()

    def select_option(self, selector: str, value: str) -> None:
        self.locator(selector).select_option(value)

    def set_input_files(self, selector: str, path: str) -> None:
        self.locator(selector).set_input_files(path)

    def text_content(self, selector: str) -> str:
        return self.locator(selector).text_content()

    def inner_text(self, selector: str) -> str:
        return self.locator(selector).inner_text()

    def input_value(self, selector: str) -> str:
        return self.locator(selector).input_value()

    def eval_on_selector(self, selector: str, script: str) -> Any:
        return self.locator(selector).evaluate(script)

    def eval_on_selector_all(self, selector: str, script: str) -> Any:
        return self.locator(selector).evaluate_all(script)

    @contextmanager
    def expect_download(self):
        self.downloads.mkdir(exist_ok=True)
        download = Download(self.downloads, {p.name for p in self.downloads.glob("*")})
        waiting = _Waiting()
        yield waiting
        self._wait(download._arrived, None, "a download")
        waiting.value = download


class Expect:
    """Playwright's `expect(locator)`, waiting until the condition holds or the page timeout."""

    def __init__(self, locator: Locator, negate: bool = False) -> None:
        self.locator = locator
        self.negate = negate

    @property
    def not_(self) -> "Expect":
        return Expect(self.locator, not self.negate)

    def _hold(self, check: Callable[[], bool], what: str) -> None:
        page = self.locator.page
        try:
            page._wait(lambda: check() != self.negate, None, what)
        except TimeoutError:
            raise AssertionError(
                f"{self.locator.steps}: expected {'not ' * self.negate}{what}"
            ) from None

    @staticmethod
    def _matches(actual: str | None, expected: Any, whole: bool) -> bool:
        if actual is None:
            return False
        if isinstance(expected, re.Pattern):
            return expected.search(actual) is not None
        actual = " ".join(actual.split())
        return actual == expected if whole else expected in actual

    def _text(self) -> str | None:
        return self.locator._all("return found.length ? found[0].textContent : null;")

    def to_be_visible(self) -> None:
        self._hold(self.locator.is_visible, "visible")

    def to_have_count(self, count: int) -> None:
        self._hold(lambda: self.locator.count() == count, f"count {count}")

    def to_have_text(self, expected: Any) -> None:
        self._hold(lambda: self._matches(self._text(), expected, True), f"text {expected!r}")

    def to_contain_text(self, expected: Any) -> None:
        self._hold(lambda: self._matches(self._text(), expected, False), f"text {expected!r}")

    def to_have_value(self, expected: str) -> None:
        value = lambda: self.locator._all("return found.length ? found[0].value : null;")  # noqa: E731
        self._hold(lambda: value() == expected, f"value {expected!r}")

    def not_to_have_value(self, expected: str) -> None:
        self.not_.to_have_value(expected)

    def to_have_attribute(self, name: str, expected: str) -> None:
        read = lambda: self.locator._all(  # noqa: E731
            "return found.length ? found[0].getAttribute(arg) : null;", name
        )
        self._hold(lambda: read() == expected, f"attribute {name}={expected!r}")
