"""Who may talk to the server, checked before any route runs.

- DNS rebinding: the Host header must be an IP literal (the address the client connected to),
  `localhost`, or a configured name. A page on evil.example that resolves to 127.0.0.1 sends
  `Host: evil.example` and gets 403.
- Tokens: `Authorization: Token <t>` is checked whenever it is sent (a wrong one is 401). Bound
  beyond loopback, every API request needs it.
- Cross-site requests: a request whose `Origin` is not the server's own (nor a configured
  origin) or that the browser marks `Sec-Fetch-Site: cross-site/same-site` needs the token, so a
  page elsewhere can neither change nor read the library. The web UI served here is same-origin
  and needs no token on loopback; the browser extension always sends one (Firefox gives each
  install a random origin, so no allowlist could name it).
- Request bodies are capped (413), also when the length is not announced.
The web UI's static files are public: they hold no data, and the UI asks for a token when needed.
"""

import hmac
import ipaddress
from urllib.parse import urlsplit

from marks.server.settings import ServerSettings
from servekit import error_response

PUBLIC = ("/", "/index.html", "/favicon.ico")
PUBLIC_PREFIX = "/static/"
UPLOAD_PREFIX = "/import/"


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


class BodyTooLarge(Exception):
    pass


class Guard:
    """Pure ASGI middleware (no per-request objects beyond the checks themselves)."""

    def __init__(self, app, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings
        self.names = {"localhost", *(n.lower() for n in settings.names)}
        self.origins = {o.rstrip("/").lower() for o in settings.origins}
        self.token = settings.token.encode()

    def host_allowed(self, host: str) -> bool:
        name = _host_name(host)
        return bool(name) and (_is_ip(name) or name in self.names)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        problem = self.check(scope, headers)
        if problem is not None:
            status, error, details, extra = problem
            await error_response(status, error, details, headers=extra)(scope, receive, send)
            return
        limit = (
            self.settings.upload_limit
            if scope["path"].startswith(UPLOAD_PREFIX)
            else self.settings.json_limit
        )
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await error_response(413, "Payload too large", f"the body is limited to {limit} bytes")(
                scope, receive, send
            )
            return
        await self.app(scope, self._capped(receive, limit), send)

    @staticmethod
    def _capped(receive, limit: int):
        seen = 0

        async def capped():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                from servekit import HTTPError

                raise HTTPError(413, "Payload too large", f"the body is limited to {limit} bytes")
            return message

        return capped

    def check(self, scope, headers: dict[str, str]):
        """None when the request may go on, else (status, error, details, headers)."""
        if not self.host_allowed(headers.get("host", "")):
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
        origin = headers.get("origin")
        if origin is not None:
            origin = origin.rstrip("/").lower()
            if origin in self.origins:
                return False
            own = urlsplit(origin)
            return own.netloc != headers.get("host", "").lower() or own.scheme not in (
                "http",
                "https",
            )
        return headers.get("sec-fetch-site", "same-origin") in ("cross-site", "same-site")


def _challenge() -> dict[str, str]:
    return {"WWW-Authenticate": 'Token realm="marks"'}
