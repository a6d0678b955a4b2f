"""`marks serve` under attack: a hostile client on raw sockets, and a hostile page in chromium
and in firefox-esr.

Everything runs against a live server on a temporary database; the page elsewhere is served by a
second local HTTP server (another port, so another origin), and DNS rebinding is played in the
browser by mapping a made-up name to loopback with the browser's own resolver settings
(chromium's host resolver rules, Firefox's `network.dns.localDomains`).
"""

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support.browserui import BROWSERS, launch
from support.marksserve import Served, start_marks


def raw(served: Served, request: bytes) -> tuple[int, dict]:
    """Send bytes as they are (no client fixes them up); the status and the decoded JSON body."""
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


def get(served: Served, target: str, *headers: str) -> tuple[int, dict]:
    lines = "".join(f"{header}\r\n" for header in headers)
    return raw(served, f"GET {target} HTTP/1.1\r\n{lines}Connection: close\r\n\r\n".encode())


# --- DNS rebinding ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    ["evil.example", "127.0.0.1.evil.example", "localhost.", "localhost:evil", "[::1]evil.example",
     "localhost@evil.example", "1.2.3.4", "0.0.0.0:8000", "127.1", "2130706433", ""],
)  # fmt: skip
def test_a_host_that_does_not_name_this_server_is_refused(served, host):
    status, body = get(served, "/bookmarks", f"Host: {host}")
    assert status == 403 and body["error"] == "Forbidden" and "rebinding" in body["details"]


@pytest.mark.parametrize(
    "host", ["LOCALHOST", "localhost:8000", "[::1]", "[::1]:9000", "127.0.0.1:8000", "127.0.0.2"]
)
def test_loopback_names_with_any_port_are_answered(served, host):
    """An ssh tunnel or a port forward changes the port; only the name matters."""
    status, body = get(served, "/bookmarks", f"Host: {host}")
    assert status == 200 and body["items"] == []


def test_an_absolute_request_target_names_the_host_too(served):
    status, body = get(served, "http://evil.example/bookmarks", "Host: localhost")
    assert status == 403 and "rebinding" in body["details"]


def test_a_repeated_security_header_is_refused(served):
    for name, first, second in (
        ("Origin", served.url, "https://evil.example"),
        ("Authorization", f"Token {served.token}", "Token wrong"),
        ("Sec-Fetch-Site", "same-origin", "cross-site"),
    ):
        status, body = get(served, "/bookmarks", "Host: localhost", f"{name}: {first}",
                           f"{name}: {second}")  # fmt: skip
        assert status == 400 and name.lower() in body["details"], name


def test_an_answer_sent_before_the_body_was_read_closes_the_connection(served):
    """Otherwise the server drops the connection silently and a keep-alive client's next request
    fails ("server disconnected"). The body here is announced but never sent."""
    port = int(served.url.rsplit(":", 1)[1])
    for extra in ("Origin: https://evil.example", "Authorization: Token wrong", "X-Any: 1"):
        path = "/nowhere" if extra == "X-Any: 1" else "/bookmarks"
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n"
                "Content-Type: application/json\r\nContent-Length: 40\r\n\r\n".encode()
            )
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(65536)
        assert b"\r\nconnection: close\r\n" in head.lower(), (extra, head)
    with served.http as client:  # and one keep-alive client goes on after refusals
        for _ in range(20):
            refused = client.post("/bookmarks", json={"url": "https://a.example/"},
                                  headers={"Origin": "https://evil.example"})  # fmt: skip
            assert refused.status_code == 403
            assert client.get("/stats").status_code == 200


# --- cross-site requests ----------------------------------------------------------------------


def test_only_the_exact_own_origin_is_same_origin(served):
    port = served.url.rsplit(":", 1)[1]
    for origin in (f"http://127.0.0.1:{int(port) + 1}", f"http://127.0.0.1:{port}/x",
                   f"http://localhost:{port}", f"ftp://127.0.0.1:{port}", "null"):  # fmt: skip
        refused = served.http.post(
            "/bookmarks", json={"url": "https://a.example/"}, headers={"Origin": origin}
        )
        assert refused.status_code == 403, origin
    assert served.http.get("/stats").json()["bookmarks"] == 0


def test_sec_fetch_site_and_referer_count_even_without_origin(served):
    body = {"url": "https://a.example/"}
    contradicting = served.http.post(
        "/bookmarks", json=body, headers={"Origin": served.url, "Sec-Fetch-Site": "cross-site"}
    )
    assert contradicting.status_code == 403
    referred = served.http.post(
        "/bookmarks", json=body, headers={"Referer": "https://evil.example/page"}
    )
    assert referred.status_code == 403
    own_page = served.http.post("/bookmarks", json=body, headers={"Referer": served.url + "/"})
    assert own_page.status_code == 201


def test_a_refused_preflight_is_a_json_error_granting_nothing(served):
    refused = served.http.options(
        "/bookmarks",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "DELETE"},
    )
    assert refused.status_code == 400
    assert refused.json()["error"] == "CORS preflight refused"
    assert not [name for name in refused.headers if name.startswith("access-control-")]


# --- bodies and parameters --------------------------------------------------------------------


def test_invalid_utf8_in_a_body_is_a_400_not_a_crash(served):
    response = served.http.post(
        "/bookmarks",
        content=b'{"url": "https://u.example/", "title": "\xff\xfe"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400 and response.json()["error"] == "Bad request"


def test_a_flood_of_tags_is_refused_at_once(served):
    tags = [f"t{number}" for number in range(20000)]
    response = served.http.post("/bookmarks", json={"url": "https://t.example/", "tags": tags})
    assert response.status_code == 422 and "at most" in response.json()["details"]
    added = served.add("https://t.example/", tags=tags[:50])
    patched = served.http.patch(f"/bookmarks/{added['id']}", json={"tags": tags})
    assert patched.status_code == 422
    assert len(served.http.get(f"/bookmarks/{added['id']}").json()["tags"]) == 50


@pytest.mark.parametrize(
    "path, params",
    [("/bookmarks", {"query": "(" * 3000 + "starred" + ")" * 3000}),
     ("/bookmarks", {"query": "not " * 3000 + "starred"}),
     ("/bookmarks", {"query": " or ".join(["starred"] * 2000)}),
     ("/search", {"q": "(" * 3000 + "a" + ")" * 3000, "fts": "1"}),
     ("/search", {"q": "-" * 3000 + "a", "fts": "1"}),
     ("/search", {"q": " OR ".join(["a"] * 2000), "fts": "1"})],
)  # fmt: skip
def test_queries_nested_or_chained_beyond_reason_are_bad_queries(served, path, params):
    response = served.http.get(path, params=params)
    assert response.status_code in (400, 422), response.text
    assert set(response.json()) >= {"error", "details"}


@pytest.mark.parametrize("value", ["\u0661\u0660", "+5", " 5", "1e3", "0x10"])
def test_numbers_are_ascii_digits(served, value):
    response = served.http.get("/bookmarks", params={"limit": value})
    assert response.status_code == 400 and "limit" in response.json()["details"]


def test_hostile_text_stays_text_in_the_markdown_export(served):
    served.add(
        "https://x.example/?a=<b>",
        title="<img src=x onerror=alert(1)> & co",
        tags=["a`b"],
        description="<script>alert(2)</script>",
    )
    text = served.http.get("/export/markdown").text
    line = next(line for line in text.splitlines() if line.startswith("- ["))
    text_only = line.replace("(<https://x.example/?a=%3Cb%3E>)", "")  # the link's own brackets
    assert "<" not in text_only.replace("\\<", "")  # every other `<` is escaped
    assert "\\<img src=x onerror=alert\\(1\\)\\> \\& co" in line
    assert "``#a`b``" in line  # a backtick inside a tag cannot end its code span


# --- a hostile page in a real browser ---------------------------------------------------------

ATTACK_PAGE = """<!doctype html><meta charset="utf-8"><title>attacking</title>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<iframe name="sink4"></iframe>
<form id="f1" target="sink1" method="post" action="TARGET/bookmarks" enctype="text/plain">
<input name='{"url":"https://plain.example/","x":"' value='"}'></form>
<form id="f2" target="sink2" method="post" action="TARGET/bookmarks"
 enctype="application/x-www-form-urlencoded"><input name="url" value="https://form.example/"></form>
<form id="f3" target="sink3" method="post" action="TARGET/import/html"
 enctype="multipart/form-data"><input type="file" name="file"></form>
<form id="f4" target="sink4" method="post" action="TARGET/bookmarks/1/visit"></form>
<script>
window.results = {};
const target = "TARGET";
async function attempt(name, run) {
  try { const r = await run(); window.results[name] = r.type === "opaque" ? "opaque" : r.status; }
  catch (e) { window.results[name] = "blocked"; }
}
async function main() {
  let loaded = 0;
  for (const frame of document.querySelectorAll("iframe"))
    frame.addEventListener("load", () => { loaded += 1; });
  const file = new DataTransfer();
  file.items.add(new File(['<DL><DT><A HREF="https://upload.example/">u</A></DL>'], "b.html"));
  document.querySelector("#f3 input").files = file.files;
  for (const id of ["f1", "f2", "f3", "f4"]) document.getElementById(id).submit();
  await attempt("post-no-cors", () => fetch(target + "/bookmarks", {method: "POST",
    mode: "no-cors", body: JSON.stringify({url: "https://nocors.example/"})}));
  await attempt("post-json", () => fetch(target + "/bookmarks", {method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({url: "https://json.example/"})}));
  await attempt("delete", () => fetch(target + "/bookmarks/1", {method: "DELETE"}));
  await attempt("read", () => fetch(target + "/bookmarks").then(r => r.json()));
  await attempt("export", () => fetch(target + "/export/json"));
  await new Promise(done => { const wait = () => loaded >= 4 ? done() : setTimeout(wait, 20);
                              wait(); });
  document.title = "done";
}
main();
</script>"""


@pytest.fixture(scope="module", params=BROWSERS)
def browser(request, tmp_path_factory):
    with launch(
        request.param,
        tmp_path_factory.mktemp(request.param),
        # DNS rebinding without DNS: this name resolves to loopback inside the browser.
        chromium_args=["--host-resolver-rules=MAP rebound.test 127.0.0.1"],
        firefox_prefs={"network.dns.localDomains": "rebound.test"},
    ) as launched:
        yield launched


class _Attacker(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def page_elsewhere(html: str):
    """Serve one page from another local port (so another origin); yields its URL."""
    handler = type("Handler", (_Attacker,), {"page": html.encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def attacker(served):
    """A page on another origin aimed at the served library."""
    with page_elsewhere(ATTACK_PAGE.replace("TARGET", served.url)) as url:
        yield url


def test_a_page_elsewhere_can_neither_write_nor_read(browser, served, attacker, tmp_path):
    kept = served.add("https://kept.example/", title="kept")
    assert kept["id"] == 1
    page = browser.new_page()
    try:
        page.goto(attacker)
        page.wait_for_function("document.title === 'done'", timeout=30000)
        results = page.evaluate("window.results")
        page.screenshot(path=str(tmp_path / "attacker.png"))
    finally:
        browser.close_page(page)
    assert results["post-no-cors"] == "opaque"  # sent, and refused (checked below)
    for name in ("post-json", "delete", "read", "export"):
        assert results[name] == "blocked", (name, results)  # CORS: nothing readable
    items = served.http.get("/bookmarks").json()["items"]
    assert [item["url"] for item in items] == ["https://kept.example/"]
    assert items[0]["visit_count"] == 0


def test_every_answer_forbids_framing_and_sniffing(served):
    for path in ("/", "/bookmarks", "/nowhere", "/static/js/app.js"):
        response = served.http.get(path)
        assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"


def test_the_web_ui_cannot_be_framed_by_another_site(browser, served, tmp_path):
    """Clickjacking: a framed UI is same-origin, so its buttons would pass every other check."""
    served.add("https://kept.example/", title="kept")
    framing = f'<!doctype html><iframe id="ui" src="{served.url}/"></iframe>'
    page = browser.new_page()
    try:
        with page_elsewhere(framing) as url:
            page.goto(url)  # waits for the load event, the frame's included
            ui = next(frame for frame in page.frames if frame is not page.main_frame)
            ui.wait_for_load_state()
            assert ui.locator("#list").count() == 0  # the UI's document never loaded in it
            page.screenshot(path=str(tmp_path / "framed.png"))
    finally:
        browser.close_page(page)


def test_a_rebound_name_gets_403_in_the_browser_and_the_ui_still_works(browser, served):
    port = served.url.rsplit(":", 1)[1]
    page = browser.new_page()
    try:
        rebound = page.goto(f"http://rebound.test:{port}/bookmarks")
        assert rebound is not None and rebound.status == 403
        assert "rebinding" in json.loads(page.inner_text("body"))["details"]
        # The web UI itself, same origin: its own writes go through without a token.
        page.goto(served.url + "/")
        page.wait_for_selector("body[data-loaded=true]")
        status = page.evaluate(
            """() => fetch("/bookmarks", {method: "POST", headers: {"Content-Type":
                "application/json"}, body: JSON.stringify({url: "https://ui.example/"})})
                .then(r => r.status)"""
        )
        assert status == 201
    finally:
        browser.close_page(page)
    assert served.http.get("/stats").json()["bookmarks"] == 1


def test_beyond_loopback_the_guard_still_checks_host_names(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("a-long-enough-test-token\n")
    process = start_marks(
        tmp_path / "l.db", tmp_path, "--host", "0.0.0.0", "--token-file", str(token_file)
    )
    server = Served(process, tmp_path / "l.db", tmp_path)
    try:
        authed = {"Authorization": "Token a-long-enough-test-token"}
        lan = server.http.get("/stats", headers={**authed, "Host": "192.168.1.20:8000"})
        assert lan.status_code == 200  # any address of this machine may lead here
        named = server.http.get("/stats", headers={**authed, "Host": "evil.example"})
        assert named.status_code == 403
        wrong = server.http.get("/stats", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "nope" not in wrong.text
    finally:
        server.close()
    assert "a-long-enough-test-token" not in process.output.replace(
        "pairing token for the browser extension: a-long-enough-test-token", ""
    )
