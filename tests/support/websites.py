"""A local web server for link health and page content tests: every kind of answer a link gets.

`Websites` runs an aiohttp app in a thread of the test process, listening on 127.0.0.1 and on more
loopback addresses (127.0.0.2, ...), each a different host to marks, so per-host limits are real.
A TLS port serves a certificate from a throwaway CA (trustme) that the system does not trust.
Nothing here touches the internet.
"""

import asyncio
import io
import socket
import ssl
import threading
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<meta name="description" content="{description}"></head>
<body><nav>Home | About | Login</nav><main><h1>{title}</h1><p>{body}</p>
<p>Second paragraph with <b>bold</b> words.</p></main>
<script>var hidden = "scriptword";</script><footer>Copyright footerword</footer></body></html>"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def make_pdf(text: str) -> bytes:
    """A one-page PDF with `text`, written by pypdf (no file from elsewhere)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    stream = DecodedStreamObject()
    stream.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
    page[NameObject("/Contents")] = writer._add_object(stream)
    writer.add_metadata({"/Title": "Generated PDF"})
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


@dataclass
class Websites:
    hosts: int = 3  # 127.0.0.1 .. 127.0.0.N
    slow_seconds: float = 5.0
    tls_cert: object | None = None  # a trustme CA when TLS is wanted
    hits: Counter = field(default_factory=Counter)  # (host, path) -> requests
    in_flight: Counter = field(default_factory=Counter)
    peak: Counter = field(default_factory=Counter)  # host -> most requests at once
    pages: dict = field(default_factory=dict)  # path -> (title, body) for /page/<name>

    def __post_init__(self) -> None:
        self.port = free_port()
        self.tls_port = free_port()
        self.closed_port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("test web server did not start")

    def url(self, path: str, host: int = 1) -> str:
        return f"http://127.0.0.{host}:{self.port}{path}"

    @property
    def tls_url(self) -> str:
        return f"https://127.0.0.1:{self.tls_port}/ok"

    @property
    def closed_url(self) -> str:
        return f"http://127.0.0.1:{self.closed_port}/nothing"

    # --- the answers -----------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._count])
        add = app.router.add_route
        add("*", "/ok", self._ok)
        add("*", "/redirect", self._redirect("/ok"))
        add("*", "/chain/{n}", self._chain)
        add("*", "/loop", self._redirect("/loop"))
        for status in (401, 403, 404, 408, 410, 429, 500, 502, 503):
            add("*", f"/status/{status}", self._status(status))
        add("*", "/challenge", self._challenge)
        add("*", "/nohead", self._nohead)
        add("*", "/slow", self._slow)
        add("*", "/flaky", self._flaky)
        add("*", "/page/{name}", self._page)
        add("*", "/etag/{name}", self._etag)
        add("*", "/doc.pdf", self._pdf)
        add("*", "/huge", self._huge)
        add("*", "/binary", self._binary)
        return app

    pdf = make_pdf("Quarterly zeppelin report about airships")

    @web.middleware
    async def _count(self, request, handler):
        key = request.host.split(":")[0]
        self.hits[(key, request.path)] += 1
        self.in_flight[key] += 1
        self.peak[key] = max(self.peak[key], self.in_flight[key])
        try:
            return await handler(request)
        finally:
            self.in_flight[key] -= 1

    async def _ok(self, request):
        return web.Response(text="fine")

    @staticmethod
    def _redirect(target: str):
        async def answer(request):
            raise web.HTTPFound(target)

        return answer

    async def _pdf(self, request):
        return web.Response(body=self.pdf, content_type="application/pdf")

    @staticmethod
    def _status(status: int):
        async def answer(request):
            return web.Response(status=status, text=f"status {status}")

        return answer

    async def _chain(self, request):
        n = int(request.match_info["n"])
        if n > 0:
            raise web.HTTPFound(f"/chain/{n - 1}")
        return web.Response(text="end of chain")

    async def _challenge(self, request):
        return web.Response(status=403, headers={"cf-mitigated": "challenge"}, text="verify")

    async def _nohead(self, request):
        if request.method == "HEAD":
            return web.Response(status=405)
        return web.Response(text="only GET")

    async def _slow(self, request):
        await asyncio.sleep(self.slow_seconds)
        return web.Response(text="late")

    async def _flaky(self, request):
        if self.hits[(request.host.split(":")[0], "/flaky")] <= 2:  # HEAD and GET
            return web.Response(status=503, headers={"Retry-After": "0"}, text="busy")
        return web.Response(text="better now")

    async def _page(self, request):
        name = request.match_info["name"]
        title, body = self.pages.get(name, (f"Page {name}", f"Body of {name}"))
        html = PAGE.format(title=title, description=f"About {title}", body=body)
        return web.Response(text=html, content_type="text/html")

    async def _etag(self, request):
        name = request.match_info["name"]
        tag = f'"v-{name}"'
        if request.headers.get("If-None-Match") == tag:
            return web.Response(status=304, headers={"ETag": tag})
        html = PAGE.format(title=f"Tagged {name}", description="", body="etagged body")
        return web.Response(text=html, content_type="text/html", headers={"ETag": tag})

    async def _huge(self, request):
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        if request.method == "HEAD":
            return response
        chunk = b"<p>" + b"x" * 65536 + b"</p>"
        try:
            for _ in range(200):  # about 13 MiB, more than any cap
                await response.write(chunk)
        except (ConnectionError, RuntimeError):
            pass
        return response

    async def _binary(self, request):
        return web.Response(body=bytes(range(256)) * 64, content_type="application/octet-stream")

    # --- running ---------------------------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        for number in range(1, self.hosts + 1):
            await web.TCPSite(runner, f"127.0.0.{number}", self.port).start()
        if self.tls_cert is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.tls_cert.configure_cert(context)
            await web.TCPSite(runner, "127.0.0.1", self.tls_port, ssl_context=context).start()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> "Websites":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
