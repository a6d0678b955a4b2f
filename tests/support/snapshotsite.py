"""A local multi-host site for snapshot tests: a page on 127.0.0.1 whose stylesheets (with
`@import` and `url()`), fonts, images and frame live on 127.0.0.2 (another host to marks), with
scripts, `on*` handlers, `javascript:` links, `<base>` and a refresh to remove, and a page behind
a cookie login for the extension's capture, whose stylesheet, font and picture on 127.0.0.2 (a
CDN with its own login) send no CORS headers. Nothing here touches the internet."""

import asyncio
import base64
import threading
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

from support.websites import free_port

# Real bytes of each kind (a 1x1 PNG, a GIF, a stand-in font): the snapshot must carry them whole.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
FONT = b"wOF2" + bytes(range(200))
SESSION = "s3cret-session"
CDN_SESSION = "cdn-session"
# The private page's files on 127.0.0.2 (a CDN that sends no CORS headers): a stylesheet with a
# font, and a picture that needs the user's login on the CDN.
CDN_CSS = b'@font-face { font-family: Tide; src: url("tide.woff2") } #secret { font-family: Tide }'
CDN_FONT = b"wOF2" + bytes(range(255, 0, -1))
CDN_PNG = PNG + b"cdn wave"

ARTICLE = """<!doctype html><html><head><meta charset="utf-8"><title>Lighthouse keepers</title>
<base href="{other}/assets/">
<meta http-equiv="refresh" content="0;url=https://example.invalid/">
<link rel="stylesheet" href="{other}/css/site.css">
<link rel="icon" href="{other}/img/icon.png">
<style>@import "{other}/css/imported.css"; .hero {{ background: url('{other}/img/bg.gif') }}</style>
<script src="{other}/js/app.js"></script>
<script>document.title = "pwned by script";</script>
</head><body onload="document.body.innerHTML='gone'">
<h1 class="hero">The lighthouse keeper's diary</h1>
<p>Fog rolled over the skerries at dawn.</p>
<img id="photo" src="{other}/img/photo.png" onerror="alert(1)" alt="photo">
<picture><source srcset="{other}/img/wide.gif 2x, {other}/img/huge.gif 3x">
<img id="small" src="{other}/img/small.png"></picture>
<img id="missing" src="{other}/img/missing.png">
<a id="bad" href="java&#09;script:alert(1)">bad</a> <a id="rel" href="/elsewhere">rel</a>
<iframe id="frame" src="{other}/frame/1"></iframe>
<svg><script>alert(2)</script><a xlink:href="javascript:alert(3)"><text>t</text></a></svg>
</body></html>"""

FRAME = """<!doctype html><html><body><p>Frame {n} says hello</p>
<img src="/img/photo.png" onclick="alert(4)"><script>parent.document.title="frame"</script>
<iframe src="/frame/{next}"></iframe></body></html>"""


@dataclass
class SnapshotSite:
    hits: Counter = field(default_factory=Counter)  # path -> requests
    in_flight: Counter = field(default_factory=Counter)  # host -> requests being answered
    peak: Counter = field(default_factory=Counter)  # host -> most requests at once
    pages: dict = field(default_factory=dict)  # path -> (content type, bytes), extra pages

    def __post_init__(self) -> None:
        # 127.0.0.2 plays another site on the internet (a CDN): marks refuses resources on
        # private addresses that are not the page's own host (marks.webclient), so this process
        # counts it as public while the site runs, and `public_env()` says so to a subprocess.
        from marks import webclient

        webclient.RULES.public.add("127.0.0.2")
        self.port = free_port()
        self.other_port = free_port("127.0.0.2")
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("snapshot site did not start")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def other(self, path: str = "") -> str:
        return f"http://127.0.0.2:{self.other_port}{path}"

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._count])
        add = app.router.add_get
        add("/article", self._article)
        add(
            "/css/site.css",
            self._text(
                '@import url("fonts.css") screen;\n'
                "body { color: #123456 }\n"
                ".logo { background-image: url(../img/logo.png) }",
                "css",
            ),
        )
        add(
            "/css/fonts.css",
            self._text(
                "@font-face { font-family: Keeper; src: "
                'url("/fonts/keeper.woff2") format("woff2") }',
                "css",
            ),
        )
        add("/css/imported.css", self._text("h1 { letter-spacing: 2px } /* imported */", "css"))
        add("/js/app.js", self._text("document.title = 'pwned';", "javascript"))
        add("/img/{name}", self._image)
        add("/fonts/keeper.woff2", self._bytes(FONT, "font/woff2"))
        add("/frame/{n}", self._frame)
        add("/login", self._login)
        add("/private", self._private)
        add("/members/{name}", self._members)
        add("/cdn/login", self._cdn_login)
        add("/cdn/{name}", self._cdn)
        add("/page/{name}", self._page)
        add("/gallery", self._gallery)
        return app

    @web.middleware
    async def _count(self, request, handler):
        self.hits[request.path] += 1
        host = request.host
        self.in_flight[host] += 1
        self.peak[host] = max(self.peak[host], self.in_flight[host])
        try:
            return await handler(request)
        finally:
            self.in_flight[host] -= 1

    async def _article(self, request):
        return web.Response(text=ARTICLE.format(other=self.other()), content_type="text/html")

    @staticmethod
    def _text(body: str, kind: str):
        async def answer(request):
            sub = "text/" + kind if kind != "javascript" else "application/javascript"
            return web.Response(body=body.encode(), headers={"Content-Type": sub})

        return answer

    @staticmethod
    def _bytes(body: bytes, kind: str):
        async def answer(request):
            return web.Response(body=body, headers={"Content-Type": kind})

        return answer

    async def _image(self, request):
        name = request.match_info["name"]
        if name == "missing.png":
            return web.Response(status=404, text="no such image")
        if name == "huge.gif":
            return web.Response(body=GIF + bytes(3 * 1024 * 1024), content_type="image/gif")
        if name.startswith("slow"):
            await asyncio.sleep(0.05)  # long enough for requests to overlap, were they allowed to
        if name.endswith(".gif"):
            return web.Response(body=GIF, content_type="image/gif")
        return web.Response(body=PNG + name.encode(), content_type="image/png")

    async def _gallery(self, request):
        images = "".join(f'<img src="{self.other(f"/img/slow{n}.png")}">' for n in range(20))
        return web.Response(text=f"<p>gallery</p>{images}", content_type="text/html")

    async def _frame(self, request):
        n = int(request.match_info["n"])
        return web.Response(text=FRAME.format(n=n, next=n + 1), content_type="text/html")

    async def _login(self, request):
        response = web.Response(text="<p>logged in</p>", content_type="text/html")
        response.set_cookie("session", SESSION, httponly=True)
        return response

    async def _private(self, request):
        if request.cookies.get("session") != SESSION:
            return web.Response(status=403, text="<p>log in first</p>", content_type="text/html")
        html = (
            "<!doctype html><html><head><title>Members only</title>"
            '<link rel="stylesheet" href="/members/style.css">'
            f'<link rel="stylesheet" href="{self.other("/cdn/tide.css")}"></head><body>'
            '<p id="secret">The members-only tide table</p>'
            '<img id="pic" src="/members/picture.png" onerror="alert(1)">'
            f'<img id="wave" src="{self.other("/cdn/wave.png")}">'
            "<script>window.ran = true</script></body></html>"
        )
        return web.Response(text=html, content_type="text/html")

    async def _members(self, request):
        """The private page's stylesheet and picture: for the logged-in user only, as on a
        site that guards its members' files (a capture without the cookie loses them)."""
        if request.cookies.get("session") != SESSION:
            return web.Response(status=403, text="log in first")
        if request.match_info["name"] == "style.css":
            return web.Response(body=b"#secret { letter-spacing: 2px }", content_type="text/css")
        return web.Response(body=PNG + b"members", content_type="image/png")

    async def _cdn_login(self, request):
        response = web.Response(text="<p>logged in to the CDN</p>", content_type="text/html")
        response.set_cookie("cdn", CDN_SESSION, httponly=True)
        return response

    async def _cdn(self, request):
        """The CDN's files, with no CORS headers (the page may show them, not read them); the
        picture is for a user logged in to the CDN only."""
        name = request.match_info["name"]
        if name == "tide.css":
            return web.Response(body=CDN_CSS, content_type="text/css")
        if name == "tide.woff2":
            return web.Response(body=CDN_FONT, content_type="font/woff2")
        if name == "wave.png" and request.cookies.get("cdn") == CDN_SESSION:
            return web.Response(body=CDN_PNG, content_type="image/png")
        return web.Response(status=403, text="log in to the CDN first")

    async def _page(self, request):
        found = self.pages.get(request.path)
        if found is None:
            return web.Response(status=404, text="none")
        return web.Response(body=found[1], headers={"Content-Type": found[0]})

    # --- running ---------------------------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        await web.TCPSite(runner, "127.0.0.2", self.other_port).start()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def close(self) -> None:
        from marks import webclient

        webclient.RULES.public.discard("127.0.0.2")
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> "SnapshotSite":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def public_env() -> dict[str, str]:
    """The environment a `marks` subprocess needs to count 127.0.0.2 as public (tests only)."""
    import os
    from pathlib import Path

    standins = str(Path(__file__).with_name("public_standins"))
    path = os.pathsep.join(filter(None, [standins, os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, "MARKS_TEST_PUBLIC": "127.0.0.2"}
