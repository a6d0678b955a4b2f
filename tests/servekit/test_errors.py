"""The JSON body and the error body, as a client of a real hypercorn server sees them."""

import re

import httpx


def test_json_response_encodes_with_msgspec(app):
    response = httpx.get(f"{app.url}/hello")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"hello": "wörld", "when": "2026-01-02T03:04:05Z"}


def test_unknown_path_is_json_404(app):
    response = httpx.get(f"{app.url}/nowhere")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "Not found"}


def test_wrong_method_is_json_405_with_allow(app):
    response = httpx.post(f"{app.url}/hello")
    assert response.status_code == 405
    assert response.json() == {"error": "Method not allowed"}
    assert "GET" in response.headers["allow"]


def test_http_error_carries_extra_fields_and_headers(app):
    response = httpx.post(f"{app.url}/refuse")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.json() == {
        "error": "Rate limit exceeded",
        "reason": "3/2 jobs",
        "retry_after": 7,
    }


def test_crash_is_500_without_traceback_and_logged_with_reference(app):
    response = httpx.get(f"{app.url}/boom")
    assert response.status_code == 500
    body = response.json()
    assert body["error"] == "Internal server error"
    assert "secret" not in response.text and "Traceback" not in response.text
    # The details name the cause (its kind and the request), not the exception's message.
    assert body["details"].startswith("unexpected RuntimeError while answering GET /boom")
    ref = re.search(r"ref ([0-9a-f]{8})", body["details"]).group(1)
    app.stop()
    log = app.output
    assert f"ref {ref}" in log
    assert "RuntimeError: secret detail" in log  # the operator sees the cause


def test_malformed_request_line_does_not_kill_the_server(app):
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(app.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(b"GARBAGE \x00\x01 nonsense\r\nHost: \xff\r\n\r\n")
        sock.recv(1024)
    assert httpx.get(f"{app.url}/hello").status_code == 200
