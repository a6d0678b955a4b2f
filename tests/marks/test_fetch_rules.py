"""Where marks' own fetches may go (issue 25, item 8): a bookmark the user made may point at any
address, loopback and the home network included, but a page on a public address cannot lead
marks to a private one (a redirect, a resource a snapshot inlines), and nothing reaches marks'
own server.

Everything here is on loopback, so a test says which loopback address stands for the internet
(`webclient.RULES.public`) and which names resolve where (`webclient.RULES.hosts`): in-process
rules no file, variable or config can set. The real classification is tested on its own.
"""

import asyncio
import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from marks import webclient
from support.marksserve import Served, start_marks
from support.servers import wait_until

PUBLIC = "127.0.0.2"  # stands for a host on the internet in these tests


class Site:
    """A tiny HTTP server on one loopback address: `/to?<url>` redirects there, `/secret` is what
    an attacker wants, `/ok` is fine; it counts what it served."""

    def __init__(self, address: str) -> None:
        site = self
        self.hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.hits.append(self.path)
                if self.path.startswith("/to?"):
                    self.send_response(302)
                    self.send_header("Location", self.path[4:])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"<title>fine</title>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sites(monkeypatch):
    monkeypatch.setattr(webclient, "RULES", webclient.AddressRules(public={PUBLIC}))
    public, private = Site(PUBLIC), Site("127.0.0.1")
    yield public, private
    public.close()
    private.close()


async def _get(url: str, page: str | None = None) -> str:
    """GET `url` (as a resource of `page` if given): the status, or the refusal."""
    settings = webclient.ClientSettings(concurrency=2, per_host=2, timeout=10)
    async with webclient.session(settings) as session:
        try:
            if page is None:
                async with session.get(url) as answer:
                    return str(answer.status)
            with webclient.led_from(page):
                async with session.get(url) as answer:
                    return str(answer.status)
        except webclient.RefusedAddress as refused:
            return str(refused)


def test_the_users_own_private_url_is_fetched(sites):
    _public, private = sites
    assert asyncio.run(_get(private.url + "/ok")) == "200"
    assert private.hits == ["/ok"]


def test_a_public_page_cannot_redirect_marks_to_a_private_address(sites):
    public, private = sites
    answer = asyncio.run(_get(f"{public.url}/to?{private.url}/secret"))
    assert answer.startswith("not fetched: ") and "a private address" in answer, answer
    assert f"reached from {PUBLIC}:" in answer
    assert private.hits == []  # not even a connection was made to it


def test_a_public_page_cannot_redirect_to_a_name_that_resolves_privately(sites):
    public, private = sites
    port = private.url.rsplit(":", 1)[1]
    webclient.RULES.hosts["intranet.test"] = ["127.0.0.1"]
    webclient.RULES.hosts["mixed.test"] = ["127.0.0.1", PUBLIC]  # only the public answer is used
    answer = asyncio.run(_get(f"{public.url}/to?http://intranet.test:{port}/secret"))
    assert answer.startswith("not fetched: intranet.test:") and "private address" in answer
    assert private.hits == []
    public_port = public.url.rsplit(":", 1)[1]
    assert asyncio.run(_get(f"{public.url}/to?http://mixed.test:{public_port}/ok")) == "200"
    assert private.hits == []


def test_redirects_within_the_users_own_host_and_to_public_hosts_are_followed(sites):
    public, private = sites
    assert asyncio.run(_get(f"{private.url}/to?{private.url}/ok")) == "200"
    assert asyncio.run(_get(f"{private.url}/to?{public.url}/ok")) == "200"
    assert private.hits == ["/to?" + private.url + "/ok", "/ok", "/to?" + public.url + "/ok"]


def test_a_pages_resources_may_not_be_private_unless_on_the_pages_own_host(sites):
    public, private = sites
    refused = asyncio.run(_get(private.url + "/secret", page=public.url + "/"))
    assert refused.startswith("not fetched: ") and private.hits == []
    assert asyncio.run(_get(public.url + "/ok", page=public.url + "/")) == "200"
    assert asyncio.run(_get(private.url + "/ok", page=private.url + "/page")) == "200"
    assert private.hits == ["/ok"]


def test_a_pooled_connection_is_checked_again_for_each_request(sites):
    """A connection made for the user's own private URL is not reused for a page's resource."""
    public, private = sites

    async def both() -> tuple[str, str]:
        settings = webclient.ClientSettings(concurrency=2, per_host=2, timeout=10)
        async with webclient.session(settings) as session:
            async with session.get(private.url + "/ok") as answer:
                first = str(answer.status)
            try:
                with webclient.led_from(public.url + "/"):
                    async with session.get(private.url + "/secret") as answer:
                        return first, str(answer.status)
            except webclient.RefusedAddress as refused:
                return first, str(refused)

    first, second = asyncio.run(both())
    assert first == "200" and second.startswith("not fetched: ")
    assert private.hits == ["/ok"]


@pytest.mark.parametrize(
    ("address", "public"),
    [("93.184.216.34", True), ("2606:2800:220:1:248:1893:25c8:1946", True),
     ("127.0.0.1", False), ("::1", False), ("10.1.2.3", False), ("172.16.0.1", False),
     ("192.168.1.1", False), ("169.254.169.254", False), ("fe80::1", False), ("fc00::1", False),
     ("100.64.0.1", False), ("0.0.0.0", False), ("::ffff:127.0.0.1", False), ("224.0.0.1", False),
     ("::ffff:10.0.0.1", False)],
)  # fmt: skip
def test_the_real_classification_of_addresses(address, public):
    found = webclient._address(address)
    assert found is not None and webclient.is_public(found) is public
    assert webclient.RULES.public == set() and webclient.RULES.hosts == {}  # nothing injected


def test_marks_serve_never_fetches_itself(tmp_path):
    """A bookmark of the server's own API, checked by the server: refused, not requested."""
    served = Served(
        start_marks(tmp_path / "library.db", tmp_path), tmp_path / "library.db", tmp_path
    )
    try:
        port = int(served.url.rsplit(":", 1)[1])
        own = [
            served.add(f"http://127.0.0.1:{port}/bookmarks", title="own", tags=["own"])["id"],
            served.add(f"http://localhost:{port}/openapi.json", title="own by name", tags=["own"])[
                "id"
            ],
        ]
        started = served.http.post("/bookmarks/health", json={"query": "tag:own"})
        assert started.status_code == 202, started.text
        check_id = started.json()["id"]
        report: dict = {}

        def done() -> bool:
            report.update(served.http.get(f"/bookmarks/health/{check_id}").json())
            return report["state"] != "running"

        assert wait_until(done, timeout=60, interval=0.1), report
        results = {item["id"]: item for item in report["results"]}
        for bookmark_id in own:
            assert results[bookmark_id]["status"] is None, results[bookmark_id]
            assert f"port {port} is marks' own server" in results[bookmark_id]["detail"]
    finally:
        served.close()


def test_own_server_covers_every_loopback_name_of_its_port(monkeypatch):
    monkeypatch.setattr(webclient, "RULES", webclient.AddressRules())
    webclient.own_server("127.0.0.1", 8123)
    for address in ("127.0.0.1", "127.0.0.2", "::1"):
        assert "own server" in (webclient.refusal(ipaddress.ip_address(address), 8123, "x:1") or "")
    assert webclient.refusal(ipaddress.ip_address("127.0.0.1"), 8124, "x:1") is None
