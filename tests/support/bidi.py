"""A small WebDriver BiDi client for Debian's firefox-esr, over the `websockets` sync client.

Firefox's own remote agent (`--remote-debugging-port`) speaks BiDi; this module starts Firefox
headless on a fresh profile, opens a session and sends commands, one reply per command id. Events
(prompts, console errors, downloads) go to listeners on their own thread, so a listener may send
commands itself (the reader thread never waits on a reply).
"""

import contextlib
import itertools
import json
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

from support import require
from support.servers import wait_until

_LISTENING = re.compile(r"WebDriver BiDi listening on (ws://\S+)")


class BiDiError(Exception):
    """A command the browser answered with an error (its `error` and `message`)."""


def firefox_path() -> str:
    path = shutil.which("firefox-esr") or shutil.which("firefox")
    require(path, "Debian package 'firefox-esr' is not installed (make test installs it as root)")
    return str(path)


class Connection:
    def __init__(self, url: str) -> None:
        self._opened = connect(url, max_size=None, open_timeout=30)
        self.socket = self._opened.__enter__()
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._listeners: dict[str, list[Callable[[dict], None]]] = {}
        self._events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._dispatch, daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self.socket:
                message = json.loads(raw)
                if "id" in message and message["id"] is not None:
                    with self._lock:
                        waiting = self._waiting.pop(message["id"], None)
                    if waiting is not None:
                        waiting.set_result(message)
                elif message.get("type") == "event":
                    self._events.put(message)
        except Exception:  # the browser went away: every waiting command learns it
            pass
        with self._lock:
            for waiting in self._waiting.values():
                waiting.set_exception(BiDiError("the browser closed the connection"))
            self._waiting.clear()
        self._events.put(None)

    def _dispatch(self) -> None:
        while (event := self._events.get()) is not None:
            for listener in list(self._listeners.get(event["method"], ())):
                listener(event["params"])

    def on(self, method: str, listener: Callable[[dict], None]) -> None:
        self._listeners.setdefault(method, []).append(listener)

    def off(self, method: str, listener: Callable[[dict], None]) -> None:
        with contextlib.suppress(ValueError):  # removed already: a page closed twice
            self._listeners.get(method, []).remove(listener)

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        number = next(self._ids)
        waiting: Future = Future()
        with self._lock:
            self._waiting[number] = waiting
        self.socket.send(json.dumps({"id": number, "method": method, "params": params or {}}))
        answer = waiting.result(timeout)
        if answer.get("type") == "error":
            raise BiDiError(f"{method}: {answer.get('error')}: {answer.get('message')}")
        return answer["result"]

    def close(self) -> None:
        self._opened.__exit__(None, None, None)


class Firefox:
    """firefox-esr headless on its own profile, with a BiDi session open (`self.bidi`)."""

    def __init__(
        self, profile: Path, prefs: dict[str, Any] | None = None, *, system_access: bool = False
    ) -> None:
        """`system_access` lets BiDi open privileged pages (an extension's moz-extension:// pages
        are refused otherwise: `--remote-allow-system-access`)."""
        profile.mkdir(parents=True, exist_ok=True)
        settings = {
            "browser.shell.checkDefaultBrowser": False,
            "browser.startup.homepage_override.mstone": "ignore",
            "datareporting.policy.dataSubmissionEnabled": False,
            "toolkit.telemetry.reportingpolicy.firstRun": False,
            "app.update.disabledForTesting": True,
            "browser.download.folderList": 2,
            "browser.download.dir": str(profile / "downloads"),
            "browser.download.useDownloadDir": True,
            "browser.download.always_ask_before_handling_new_types": False,
            "devtools.jsonview.enabled": False,  # JSON answers as text, as in Chromium
            # Nothing leaves the machine: no remote settings, experiments, safe browsing,
            # captive-portal or connectivity probes, add-on metadata or region lookups.
            "services.settings.server": "http://127.0.0.1:9/",
            "app.normandy.enabled": False,
            "messaging-system.rsexperimentloader.enabled": False,
            "browser.safebrowsing.malware.enabled": False,
            "browser.safebrowsing.phishing.enabled": False,
            "browser.safebrowsing.downloads.enabled": False,
            "browser.safebrowsing.update.enabled": False,
            "network.captive-portal-service.enabled": False,
            "network.connectivity-service.enabled": False,
            "extensions.getAddons.cache.enabled": False,
            "extensions.update.enabled": False,
            "browser.region.network.url": "",
            "browser.region.update.enabled": False,
            "browser.newtabpage.activity-stream.feeds.system.topstories": False,
            "browser.newtabpage.activity-stream.feeds.snippets": False,
            "browser.startup.page": 0,
            "browser.startup.homepage": "about:blank",
            "browser.newtabpage.enabled": False,
            "toolkit.telemetry.enabled": False,
            "datareporting.healthreport.uploadEnabled": False,
            "network.dns.disablePrefetch": True,
            "network.prefetch-next": False,
            **(prefs or {}),
        }
        (profile / "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in settings.items())
        )
        self.downloads = profile / "downloads"
        self.log = profile / "firefox.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [firefox_path(), "--headless", "--no-remote", "--profile", str(profile),
                 "--remote-debugging-port=0",
                 *(["--remote-allow-system-access"] if system_access else [])],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            wait_until(lambda: _LISTENING.search(self.log.read_text()), timeout=60)
            found = _LISTENING.search(self.log.read_text())
            assert found, f"firefox did not start its remote agent:\n{self.log.read_text()}"
            self.bidi = Connection(found.group(1) + "/session")
            self.bidi.send(
                "session.new",
                {"capabilities": {"alwaysMatch": {
                    "acceptInsecureCerts": True, "unhandledPromptBehavior": {"default": "ignore"},
                }}},
            )  # fmt: skip
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already gone, or closing as it answered
            self.bidi.send("browser.close", timeout=15)
        self.bidi.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
