"""Hostile data in what marks reads (issue 25, item 8): files and bodies built to exhaust the
decoder, the memory or the report, and the library file's permissions."""

import json
import socket
import stat

DEEP = 100_000  # far past any decoder's recursion limit


def test_deeply_nested_json_import_is_one_line_and_exit_1(marks, tmp_path):
    for name, text in (
        ("array.json", "[" * DEEP + "]" * DEEP),
        ("object.json", '{"a":' * DEEP + "1" + "}" * DEEP),
        ("item.json", '[{"url": "https://a.example/", "x": ' + "[" * DEEP + "]" * DEEP + "}]"),
    ):
        path = tmp_path / name
        path.write_text(text)
        result = marks("import", "json", str(path))
        assert result.code == 1, (name, result)
        assert result.err.strip().count("\n") == 0 and "nested too deeply" in result.err, name
        assert "Traceback" not in result.err
    assert marks("-o", "json", "bookmark", "list").out.strip() in ("[]", '{"items": []}', "")


def test_deeply_nested_chrome_folders_are_one_line(marks, tmp_path):
    # Deep enough for Python's own walk of the folders, not only the decoder, to run out.
    leaf = '{"type": "url", "name": "x", "url": "https://deep.example/"}'
    opening, closing = '{"type": "folder", "name": "f", "children": [', "]}"
    path = tmp_path / "Bookmarks"
    path.write_text('{"roots": {"bookmark_bar": ' + opening * 5000 + leaf + closing * 5000 + "}}")
    result = marks("import", "json", str(path))
    assert result.code == 1 and "nested too deeply" in result.err, result
    assert "Traceback" not in result.err


def test_deeply_nested_bodies_are_422_with_the_json_error(served):
    upload = served.http.post("/import/json", content="[" * DEEP + "]" * DEEP)
    assert upload.status_code == 422, upload.text
    assert "nested too deeply" in upload.json()["details"]
    assert served.http.get("/bookmarks").json()["items"] == []


def test_the_library_file_and_its_wal_are_created_0600(db_path):
    from marks.store import Store

    store = Store(db_path)  # a connection held open keeps -wal and -shm on disk
    try:
        store.execute("INSERT INTO tags (name) VALUES ('x')")
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE((db_path.parent / (db_path.name + suffix)).stat().st_mode)
            assert mode == 0o600, (suffix, oct(mode))
    finally:
        store.close()


def test_every_json_body_decoder_refuses_deep_nesting_as_422():
    """The REST bodies' one decoder: typed bodies mostly fail before the depth does, an untyped
    one (a plugin's) reaches it."""
    from typing import Any

    import pytest

    from marks.server.endpoint import decode
    from servekit import HTTPError

    with pytest.raises(HTTPError) as refused:
        decode(b"[" * DEEP + b"]" * DEEP, Any)
    assert str(refused.value) == "422 Invalid: the body is nested too deeply"


# --- the WebSocket upgrade ---------------------------------------------------------------------


def _upgrade(served, path: str = "/", host: str | None = None, **options):
    """Try a real WebSocket handshake (to `host`, a name rebound to the server); (status,
    body) of the refusal, or (101, b"")."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    port = int(served.url.rsplit(":", 1)[1])
    url = f"ws://{host or '127.0.0.1'}:{port}{path}"
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        with connect(url, sock=sock, open_timeout=20, **options):
            return 101, b""
    except InvalidStatus as refused:
        return refused.response.status_code, refused.response.body


def test_a_websocket_from_a_page_elsewhere_is_refused_like_http(served):
    status, body = _upgrade(served, "/", origin="http://evil.example")
    assert status == 403
    assert json.loads(body) == {
        "error": "Forbidden",
        "details": "cross-site request without a token",
    }
    status, body = _upgrade(served, "/static/app.js", origin="http://127.0.0.1:1")
    assert status == 403 and json.loads(body)["details"] == "cross-site request without a token"


def test_a_websocket_with_a_rebound_host_is_refused_like_http(served):
    status, body = _upgrade(served, "/", host="evil.example")
    assert status == 403
    assert json.loads(body)["details"] == "unknown Host (DNS-rebinding guard)"


def test_a_websocket_from_the_server_itself_passes_the_guard(served):
    """The guard lets its own origin by (marks has no socket route: the app then says no)."""
    status, body = _upgrade(served, "/", origin=served.url)
    assert status == 403 and b"DNS-rebinding" not in body and b"cross-site" not in body
