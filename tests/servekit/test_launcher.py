"""The hypercorn launcher: announced address, TLS, and graceful shutdown on SIGTERM."""

import ssl
import threading

import httpx
import pytest
import trustme

from servekit import Listener
from support.servers import wait_until


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
