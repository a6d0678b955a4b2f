"""The hypercorn launcher: announced address, TLS, and graceful shutdown on SIGTERM."""

import contextlib
import os
import re
import signal
import socket
import ssl
import threading

import httpx
import pytest
import trustme

from servekit import Listener, launcher
from support.servers import wait_until

TCP_ESTABLISHED = 1  # tcpi_state, the first byte of TCP_INFO (linux/tcp_states.h)


def test_listener_needs_both_tls_files():
    with pytest.raises(ValueError):
        Listener(certfile="cert.pem")


def test_listener_urls():
    assert Listener("::1", 8443, "c", "k").url() == "https://[::1]:8443"
    assert Listener("127.0.0.1", 0).url(5000) == "http://127.0.0.1:5000"


def test_port_zero_announces_the_real_port(app):
    assert app.url.startswith("http://127.0.0.1:")
    assert not app.url.endswith(":0")


def test_sigterm_finishes_open_requests_then_exits(app):
    results: dict[str, object] = {}

    def slow_request() -> None:
        results["response"] = httpx.get(f"{app.url}/slow?seconds=1.5", timeout=10)

    thread = threading.Thread(target=slow_request)
    thread.start()
    assert wait_until(lambda: "slow request started" in app.output)  # the request is in flight
    app.terminate()
    thread.join(10)
    assert results["response"].status_code == 200
    assert results["response"].json() == {"slept": True}
    assert app.wait(10) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{app.url}/hello", timeout=2)


def test_a_second_sigterm_ends_a_drain_at_once(start_app):
    # The first signal starts `before_shutdown` (here one that never ends by itself, as a drain
    # waiting for its results to be collected can last many minutes) while the server answers;
    # the second cancels it and the server exits.
    app = start_app("--linger")
    app.terminate()
    assert wait_until(lambda: "lingering" in app.output, timeout=30), app.output
    assert httpx.get(f"{app.url}/hello", timeout=10).status_code == 200  # still serving
    app.terminate()
    assert app.wait(30) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{app.url}/hello", timeout=2)


def test_https_with_certificate_and_key(start_app, tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile, cafile = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(certfile)
    cert.private_key_pem.write_to_path(keyfile)
    ca.cert_pem.write_to_path(cafile)
    server = start_app("--certfile", str(certfile), "--keyfile", str(keyfile))
    assert server.url.startswith("https://127.0.0.1:")
    response = httpx.get(f"{server.url}/hello", verify=ssl.create_default_context(cafile=cafile))
    assert response.status_code == 200
    assert response.json()["hello"] == "wörld"
    with pytest.raises(httpx.ConnectError):  # a client without the CA refuses the certificate
        httpx.get(f"{server.url}/hello")


def test_tls_negotiates_http1_only(start_app, tmp_path):
    # hypercorn offered h2 by ALPN, and its h2 buffers what the app sends without bound while a
    # client keeps its flow-control window shut.
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(certfile)
    cert.private_key_pem.write_to_path(keyfile)
    server = start_app("--certfile", str(certfile), "--keyfile", str(keyfile))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    context.set_alpn_protocols(["h2", "http/1.1"])
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=10)
    with context.wrap_socket(raw, server_hostname=host) as conn:
        assert conn.selected_alpn_protocol() == "http/1.1"
        conn.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert conn.recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")


def exchange(url: str, request: bytes) -> bytes:
    """Send `request` and read the answer until the server closes the connection."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    answer = b""
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        with contextlib.suppress(ConnectionError):
            while chunk := conn.recv(65536):
                answer += chunk
    return answer


def test_http2_prior_knowledge_is_refused_and_h2c_upgrade_ignored(app):
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    settings = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame
    refused = exchange(app.url, preface + settings)
    assert refused.startswith(b"HTTP/1.1 505 HTTP Version Not Supported\r\n"), refused
    upgrade = (
        b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings, close\r\n"
        b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
    )
    answered = exchange(app.url, upgrade)
    assert answered.startswith(b"HTTP/1.1 200 OK\r\n"), answered  # not 101 Switching Protocols
    assert b'"hello"' in answered


def _announced(server, name: str) -> str:
    match = re.search(rf"^{name} on (\S+)$", server.output, re.MULTILINE)
    assert match, server.output
    return match.group(1)


def test_side_app_on_its_own_listener_stops_with_the_server(start_app):
    server = start_app("--side-port", "0")
    side_url = _announced(server, "side")
    assert side_url != server.url
    assert httpx.get(f"{side_url}/side", timeout=10).json() == {"side": True}
    assert httpx.get(f"{side_url}/hello", timeout=10).status_code == 404  # only its own routes
    assert httpx.get(f"{server.url}/side", timeout=10).status_code == 404
    assert httpx.get(f"{server.url}/hello", timeout=10).status_code == 200
    server.terminate()
    assert server.wait(10) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{side_url}/side", timeout=2)


def test_side_listener_that_cannot_bind_stops_the_start(start_app):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="server did not start") as failed:
            start_app("--side-port", str(port))
    assert "Address already in use" in str(failed.value)
    assert "listening on" not in str(failed.value)  # nothing was announced


def test_the_start_up_is_frozen_and_full_collections_are_rarer(app):
    """`serve` (a console script's server) keeps its start-up's objects out of every collection
    and collects the oldest generation ten times less often than CPython does by default: each
    full collection stops the event loop to scan every object alive and, with no cyclic garbage
    per request, frees nothing. The young generations keep their thresholds."""
    import gc

    answer = httpx.get(f"{app.url}/collector").json()
    young, middle, _ = gc.get_threshold()  # this test process's, CPython's defaults
    assert answer["threshold"] == [young, middle, launcher.FULL_COLLECTION_AFTER]
    assert 10 * gc.get_threshold()[2] <= launcher.FULL_COLLECTION_AFTER
    assert answer["frozen"] > 10_000  # the imports', at the least


def test_a_burst_of_connections_waits_in_the_kernel_not_for_a_retransmission(app):
    """Clients connecting at once while the server is busy are held, completed, by the kernel
    until the server accepts them: `BACKLOG` of them. Beyond that queue a client's SYN is
    dropped and its connect waits for the retransmission (1 s, then 3 s). hypercorn listens again
    with its own backlog (100 by default), which cut the launcher's queue to 100: 300 clients
    connecting at once to a busy server, 199 of them waited a second. A stopped server is the
    busiest: it accepts nothing, so the queue alone holds what it can."""
    burst = 300
    assert burst < launcher.BACKLOG
    host, port = app.url.removeprefix("http://").rsplit(":", 1)
    clients = [socket.socket() for _ in range(burst)]
    os.kill(app.proc.pid, signal.SIGSTOP)
    try:
        for client in clients:
            client.setblocking(False)
            client.connect_ex((host, int(port)))  # EINPROGRESS: the handshake goes on alone

        def completed() -> int:  # handshakes done: the connection waits in the server's queue
            states = (c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] for c in clients)
            return sum(state == TCP_ESTABLISHED for state in states)

        # A SYN retransmitted meets the same full queue: beyond it, a client never completes.
        assert wait_until(lambda: completed() == burst), f"{completed()} of {burst} completed"
    finally:
        os.kill(app.proc.pid, signal.SIGCONT)
        for client in clients:
            client.close()
    assert httpx.get(f"{app.url}/hello", timeout=10).status_code == 200
