"""The server's safety by default: Host guard, tokens, cross-site writes, CORS, binding."""

import subprocess
import threading

import httpx
import pytest

from support.marksrun import MARKS, Runner
from support.marksserve import Served, start_marks

EXTENSION = "chrome-extension://" + "abcdefghijklmnopabcdefghijklmnop"
FIREFOX = "moz-extension://0b2c4d1e-8f3a-4b5c-9d6e-7f8a9b0c1d2e"


def test_a_page_elsewhere_that_resolves_to_loopback_gets_403(served):
    response = served.http.get("/bookmarks", headers={"Host": "evil.example"})
    assert response.status_code == 403 and "rebinding" in response.json()["details"]
    assert served.http.get("/", headers={"Host": "evil.example:8000"}).status_code == 403
    assert served.http.get("/bookmarks", headers={"Host": "localhost"}).status_code == 200


def test_configured_names_are_answered(tmp_path):
    process = start_marks(tmp_path / "l.db", tmp_path, "--name", "marks.lan")
    server = Served(process, tmp_path / "l.db", tmp_path)
    try:
        assert server.http.get("/stats", headers={"Host": "marks.lan:8000"}).status_code == 200
        assert server.http.get("/stats", headers={"Host": "other.lan"}).status_code == 403
    finally:
        server.close()


def test_cross_site_writes_need_the_token(served):
    body = {"url": "https://a.example/"}
    evil = served.http.post("/bookmarks", json=body, headers={"Origin": "https://evil.example"})
    assert evil.status_code == 403
    fetched = served.http.post("/bookmarks", json=body, headers={"Sec-Fetch-Site": "cross-site"})
    assert fetched.status_code == 403
    same = served.http.post("/bookmarks", json=body, headers={"Origin": served.url})
    assert same.status_code == 201  # the web UI served here: same origin, no token
    extension = served.http.post(
        "/bookmarks", json={"url": "https://b.example/"},
        headers={"Origin": EXTENSION, **served.authed()},
    )  # fmt: skip
    assert extension.status_code == 201
    assert extension.headers["access-control-allow-origin"] == EXTENSION
    without = served.http.get("/bookmarks", headers={"Origin": FIREFOX})
    assert without.status_code == 403  # any extension may not read the library without pairing
    assert served.http.get("/stats").json()["bookmarks"] == 2


def test_a_wrong_token_is_refused_everywhere(served):
    wrong = served.http.get("/bookmarks", headers={"Authorization": "Token nope"})
    assert wrong.status_code == 401 and "www-authenticate" in wrong.headers
    bad_scheme = served.http.get("/bookmarks", headers={"Authorization": "Basic eDp5"})
    assert bad_scheme.status_code == 401
    assert served.http.get("/bookmarks", headers=served.authed()).status_code == 200


def test_cors_allows_extensions_and_configured_origins_never_star(tmp_path):
    process = start_marks(tmp_path / "l.db", tmp_path, "--origin", "http://localhost:3000")
    server = Served(process, tmp_path / "l.db", tmp_path)
    try:
        for origin in (EXTENSION, FIREFOX, "http://localhost:3000"):
            preflight = server.http.options(
                "/bookmarks",
                headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                         "Access-Control-Request-Headers": "authorization, content-type"},
            )  # fmt: skip
            assert preflight.status_code == 200, origin
            assert preflight.headers["access-control-allow-origin"] == origin
        refused = server.http.options(
            "/bookmarks",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        listed = server.http.get("/bookmarks", headers={"Origin": "http://localhost:3000"})
        assert listed.status_code == 200
        assert listed.headers["access-control-allow-origin"] == "http://localhost:3000"
        evil = server.http.get("/bookmarks", headers={"Origin": "https://evil.example"})
        assert evil.headers.get("access-control-allow-origin") is None
    finally:
        server.close()


def test_serve_prints_the_token_that_config_token_shows(served, tmp_path):
    runner = Runner(served.db)
    shown = runner.process("config", "token", env=_env(tmp_path))
    assert shown.code == 0 and shown.out.strip() == served.token and len(served.token) >= 24


def _env(home):
    import os

    return {
        **os.environ,
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def test_beyond_loopback_it_refuses_to_start_without_a_token(tmp_path):
    done = subprocess.run(
        [MARKS, "--db", str(tmp_path / "l.db"), "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "without an API token" in done.stderr and "Traceback" not in done.stderr


def test_beyond_loopback_every_api_request_needs_the_token(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-for-the-test\n")
    process = start_marks(
        tmp_path / "l.db", tmp_path, "--host", "0.0.0.0", "--token-file", str(token_file)
    )
    try:
        port = process.url.rsplit(":", 1)[1]
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/bookmarks").status_code == 401
        assert httpx.get(f"{base}/").status_code == 200  # the UI itself, which then asks
        ok = httpx.get(
            f"{base}/bookmarks", headers={"Authorization": "Token s3cret-token-for-the-test"}
        )
        assert ok.status_code == 200
    finally:
        process.stop()


@pytest.mark.timeout(180)
def test_cli_import_while_the_api_writes(served, tmp_path):
    """WAL, a busy timeout and short transactions: nobody sees "database is locked"."""
    lines = "".join(f"https://import.example/{n}\n" for n in range(20000))
    (tmp_path / "urls.txt").write_text(lines)
    failures: list[str] = []
    stop = threading.Event()
    written = [0]

    def api_writes() -> None:
        with httpx.Client(base_url=served.url, timeout=60) as client:
            while not stop.is_set():
                number = written[0]
                response = client.post("/bookmarks", json={"url": f"https://api.example/{number}"})
                if response.status_code != 201:
                    failures.append(response.text)
                    return
                written[0] += 1

    writer = threading.Thread(target=api_writes)
    writer.start()
    try:
        for round_number in range(3):
            result = Runner(served.db).process(
                "import", "text", "--update", str(tmp_path / "urls.txt"), env=_env(tmp_path)
            )
            assert result.code == 0, result.err
            assert "locked" not in result.err
            if round_number == 0:
                assert "added 20000" in result.err
    finally:
        stop.set()
        writer.join(60)
    assert not failures, failures[:1]
    assert written[0] > 0
    stats = served.http.get("/stats").json()
    assert stats["bookmarks"] == 20000 + written[0]


def test_config_token_new_replaces_it_and_lists_are_set_with_commas(tmp_path):
    runner = Runner(tmp_path / "l.db")
    env = _env(tmp_path)
    first = runner.process("config", "token", env=env).out.strip()
    assert first and runner.process("config", "token", env=env).out.strip() == first
    second = runner.process("config", "token", "--new", env=env).out.strip()
    assert second and second != first
    done = runner.process("config", "set", "cors_origins", "http://a.test, http://b.test", env=env)
    assert done.code == 0, done.err
    shown = runner.process("--output", "json", "config", "show", env=env).out
    assert '"cors_origins":["http://a.test","http://b.test"]' in shown.replace(" ", "")
