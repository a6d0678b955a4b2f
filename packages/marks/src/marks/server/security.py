"""Who may talk to the server, checked before any route runs.

- DNS rebinding: the Host header (and an absolute-form request target) must be a well-formed
  `localhost`, a configured name, or an IP literal that can reach the bound socket. A page on
  evil.example that resolves to 127.0.0.1 sends `Host: evil.example` and gets 403. A request that
  repeats a header the guard decides on (Host, Origin, Authorization, ...) is refused (400).
- Tokens: `Authorization: Token <t>` is checked whenever it is sent (a wrong one is 401). Bound
  beyond loopback, every API request needs it.
- Cross-site requests: a request whose `Origin` is not exactly the server's own (host and
  port, over http or https; nor a configured origin), that the browser marks `Sec-Fetch-Site:
  cross-site/same-site`, or, with neither header, whose `Referer` is another origin, needs the
  token, so a page elsewhere can neither change nor read the library. The web UI served here is
  same-origin and needs no token on loopback; the browser extension always sends one (Firefox
  gives each install a random origin, so no allowlist could name it).
- Request bodies are capped (413), also when the length is not announced.
The web UI's static files are public: they hold no data, and the UI asks for a token when needed.
"""

import hmac
import ipaddress
import re
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from marks.server.settings import ServerSettings
from servekit import error_response

PUBLIC = ("/", "/index.html", "/favicon.ico")
PUBLIC_PREFIX = "/static/"
UPLOAD_PREFIX = "/import/"
SNAPSHOT_SUFFIX = "/snapshots"  # POST /bookmarks/{id}/snapshots: a whole page, up to its cap


# `name` or `name:port`, where name is a DNS name or an IPv4 literal, or `[IPv6]` with an
# optional port. Anything else (`localhost:evil`, `[::1]evil.example`) is not a Host at all.
_HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[^\[\]:@/\\\s]+)(:[0-9]{1,5})?$")
# On every answer. The web UI may not be framed by another site (clickjacking: a framed UI is
# same-origin, so its clicks would pass every check above); it loads only its own files and runs
# no inline script, so an HTML string that slipped into the page could not run either; and no
# answer is sniffed into another type (an export opened in a tab stays what it says it is).
HARDENING = (
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        b"form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
# Headers the guard decides on: sent twice, the guard and the application could read different
# values, so a request repeating one is refused.
_SINGLE = ("host", "origin", "authorization", "sec-fetch-site", "referer")


def _host_name(value: str) -> str:
    """The name part of a Host header, lowercased; "" when it is not a well-formed Host."""
    found = _HOST.match(value.strip().lower())
    return found.group(1) if found else ""


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


class _Body:
    """Follows one request's body. An answer sent before the body was read to its end (a refusal,
    a 404, a 413) says `Connection: close`: the server drops the connection after it, and a
    client told so opens a new one rather than sending its next request into a closed socket.
    Every answer also carries the HARDENING headers."""

    def __init__(self, headers: dict[str, str]) -> None:
        length = headers.get("content-length", "0").strip()
        self.read = length in ("", "0") and "transfer-encoding" not in headers
        self.seen = 0

    def capped(self, receive: Receive, limit: int) -> Receive:
        async def capped() -> Message:
            message = await receive()
            self.seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                self.read = True
            if self.seen > limit:
                from servekit import HTTPError

                raise HTTPError(413, "Payload too large", f"the body is limited to {limit} bytes")
            return message

        return capped

    def closing(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                # A route that sets its own policy (a snapshot: sandboxed, framed by the web UI)
                # keeps it; every other answer gets the defaults.
                own = {name.lower() for name, _ in message["headers"]}
                hardening = [(name, value) for name, value in HARDENING if name not in own]
                extra = [*hardening, *([(b"connection", b"close")] if not self.read else [])]
                message = {**message, "headers": [*message["headers"], *extra]}
            await send(message)

        return sending


class Guard:
    """Pure ASGI middleware (no per-request objects beyond the checks themselves)."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings
        self.names = {"localhost", *(n.lower() for n in settings.names)}
        self.origins = {o.rstrip("/").lower() for o in settings.origins}
        self.token = settings.token.encode()
        self.bound = _ip(settings.host) if settings.host != "localhost" else _ip("127.0.0.1")
        self.scheme = "https" if settings.tls else "http"

    def host_allowed(self, host: str) -> bool:
        """A configured name, `localhost`, or an IP literal that can reach this socket: on a
        loopback or a specific address, only that address and loopback ones (a proxied port, an
        ssh tunnel keep working); on a wildcard bind, any address (the token guards it)."""
        name = _host_name(host)
        if name in self.names:
            return True
        address = _ip(name)
        if address is None:
            return False
        if self.bound is None or self.bound.is_unspecified:
            return True  # bound by name or to every address: any literal may lead here
        return address.is_loopback or address == self.bound

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        repeated = None
        for key, value in scope["headers"]:
            name = key.decode("latin-1").lower()
            if name in headers and name in _SINGLE:
                repeated = name
            headers.setdefault(name, value.decode("latin-1"))
        problem = (
            (400, "Bad request", f"the {repeated} header is repeated", None)
            if repeated
            else self.check(scope, headers)
        )
        body = _Body(headers)
        send = body.closing(send)
        if problem is not None:
            status, error, details, extra = problem
            await error_response(status, error, details, headers=extra)(scope, receive, send)
            return
        limit = (
            self.settings.upload_limit
            if scope["path"].startswith(UPLOAD_PREFIX)
            else self.settings.snapshot_limit
            if scope["path"].endswith(SNAPSHOT_SUFFIX)
            else self.settings.json_limit
        )
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await error_response(413, "Payload too large", f"the body is limited to {limit} bytes")(
                scope, receive, send
            )
            return
        await self.app(scope, body.capped(receive, limit), send)

    def check(
        self, scope: Scope, headers: dict[str, str]
    ) -> tuple[int, str, str, dict[str, str] | None] | None:
        """None when the request may go on, else (status, error, details, headers)."""
        if not self.host_allowed(headers.get("host", "")):
            return 403, "Forbidden", "unknown Host (DNS-rebinding guard)", None
        target = scope.get("raw_path", b"").decode("latin-1")
        # An absolute-form target (`GET http://evil.example/...`) names the real Host itself.
        if "://" in target.split("?", 1)[0] and not self.host_allowed(urlsplit(target).netloc):
            return 403, "Forbidden", "unknown Host (DNS-rebinding guard)", None
        path = scope["path"]
        if scope["method"] in ("GET", "HEAD") and (
            path in PUBLIC or path.startswith(PUBLIC_PREFIX)
        ):
            return None
        if scope["method"] == "OPTIONS":
            return None  # CORS preflight: answered by the CORS layer, carries no credentials
        sent = headers.get("authorization")
        if sent is not None:
            scheme, _, value = sent.partition(" ")
            if scheme.lower() not in ("token", "bearer") or not self.token:
                return 401, "Unauthorized", "send Authorization: Token <token>", _challenge()
            if not hmac.compare_digest(value.strip().encode(), self.token):
                return 401, "Unauthorized", "wrong token", _challenge()
            return None
        if self.settings.token_required:
            return 401, "Unauthorized", "this server needs a token", _challenge()
        if self._cross_site(headers):
            return 403, "Forbidden", "cross-site request without a token", None
        return None

    def _cross_site(self, headers: dict[str, str]) -> bool:
        """Whether a browser says this request comes from a page that is not ours: by its
        `Origin`, by `Sec-Fetch-Site`, or (an older browser sending neither) by its `Referer`."""
        host = headers.get("host", "").strip().lower()
        # Our own scheme, or https in front of it: a reverse proxy on a configured name may end
        # TLS, and nothing else can listen on this very host and port.
        own = {f"{self.scheme}://{host}", f"https://{host}"}
        origin = headers.get("origin")
        if origin is not None:
            origin = origin.strip().rstrip("/").lower()
            if origin in self.origins:
                return False
            if origin not in own:
                return True
        if headers.get("sec-fetch-site", "same-origin").strip().lower() in (
            "cross-site",
            "same-site",
        ):
            return True
        referer = headers.get("referer")
        if origin is None and referer:
            parts = urlsplit(referer.strip())
            return f"{parts.scheme}://{parts.netloc}".lower() not in (*own, *self.origins)
        return False


def _challenge() -> dict[str, str]:
    return {"WWW-Authenticate": 'Token realm="marks"'}
