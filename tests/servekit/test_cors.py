"""The CORS policy, checked by its headers and by a real browser making cross-origin requests."""

import http.server
import threading

import httpx
import pytest

from servekit import CorsPolicy
from support import chromium_path

EXTENSION = "chrome-extension://" + "abcdefghijklmnopabcdefghijklmnop"


def preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(url, headers={"Origin": origin, "Access-Control-Request-Method": "POST"})


def test_anyone_allows_every_origin_and_exposes_retry_after(app):
    response = preflight(f"{app.url}/refuse", "https://elsewhere.example")
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    simple = httpx.post(f"{app.url}/refuse", headers={"Origin": "https://elsewhere.example"})
    assert simple.headers["access-control-allow-origin"] == "*"
    assert "retry-after" in simple.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-credentials" not in simple.headers


def test_only_allows_listed_origins_and_extensions(start_app):
    server = start_app("--cors-only", "http://localhost:3000", "--cors-extensions")
    allowed = preflight(f"{server.url}/hello", "http://localhost:3000")
    assert allowed.headers["access-control-allow-origin"] == "http://localhost:3000"
    extension = preflight(f"{server.url}/hello", EXTENSION)
    assert extension.headers["access-control-allow-origin"] == EXTENSION
    refused = preflight(f"{server.url}/hello", "https://evil.example")
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    plain = httpx.get(f"{server.url}/hello", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in plain.headers


def test_only_refuses_a_wildcard():
    with pytest.raises(ValueError):
        CorsPolicy.only("*")


@pytest.fixture
def page_origin():
    """A second origin serving an empty page, from which the browser makes its requests."""
    handler = type(
        "Quiet",
        (http.server.SimpleHTTPRequestHandler,),
        {
            "log_message": lambda *a: None,
            "do_GET": lambda self: (
                self.send_response(200),
                self.send_header("Content-Type", "text/html"),
                self.end_headers(),
                self.wfile.write(b"<html><body>page</body></html>"),
            ),
        },
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


FETCH = """async (url) => {
  try { const r = await fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json'},
                                    body: '{}'});
        return {ok: true, status: r.status, retry: r.headers.get('Retry-After')}; }
  catch (e) { return {ok: false, error: String(e)}; }
}"""


def browser_fetch(page_url: str, target: str) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path(),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page()
            page.goto(page_url)
            return page.evaluate(FETCH, target)
        finally:
            browser.close()


def test_browser_reads_cross_origin_answer_when_allowed(app, page_origin):
    result = browser_fetch(page_origin, f"{app.url}/refuse")
    assert result == {"ok": True, "status": 429, "retry": "7"}


def test_browser_blocks_cross_origin_answer_when_not_allowed(start_app, page_origin):
    server = start_app("--cors-only", "http://localhost:3000")
    result = browser_fetch(page_origin, f"{server.url}/refuse")
    assert result["ok"] is False and "Failed to fetch" in result["error"]
