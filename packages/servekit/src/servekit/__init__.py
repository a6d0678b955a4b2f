"""HTTP plumbing shared by the jobrunner and marks servers.

Each module holds one idea: `responses` (msgspec JSON), `errors` (the JSON error body and the
exception handlers that send it), `clientaddr` (who is asking, behind trusted proxies), `cors`
(the cross-origin policy) and `launcher` (hypercorn with TLS and graceful shutdown).
"""

from servekit.clientaddr import TrustedProxies, client_ip, rate_key
from servekit.cors import CorsPolicy
from servekit.errors import ErrorBody, HTTPError, error_response, exception_handlers
from servekit.launcher import Listener, serve
from servekit.responses import JSONResponse

__version__ = "0.1.0"

__all__ = [
    "CorsPolicy",
    "ErrorBody",
    "HTTPError",
    "JSONResponse",
    "Listener",
    "TrustedProxies",
    "client_ip",
    "error_response",
    "exception_handlers",
    "rate_key",
    "serve",
]
