"""HTTP plumbing shared by the jobrunner and marks servers.

Each module holds one idea: `responses` (msgspec JSON), `errors` (the JSON error body and the
exception handlers that send it), `clientaddr` (who is asking, behind trusted proxies), `cors`
(the cross-origin policy), `streaming` (bodies and WebSockets that stop when the client leaves),
`descriptors` (open files: the limit, a reserve for new clients), `connections` (a closed
connection freed by reference counting, not left to the cyclic garbage collector) and `launcher`
(hypercorn, HTTP/1.1 only, with TLS, a write timeout, graceful shutdown and side apps on
listeners of their own).
"""

from servekit.clientaddr import TrustedProxies, client_ip, rate_key
from servekit.cors import CorsPolicy
from servekit.errors import ErrorBody, HTTPError, error_response, exception_handlers
from servekit.launcher import Listener, SideApp, serve
from servekit.responses import JSONResponse
from servekit.streaming import (
    ClientFile,
    ClientStream,
    first_of,
    until_gone,
    while_connected,
)

__version__ = "0.1.0"

__all__ = [
    "ClientFile",
    "ClientStream",
    "CorsPolicy",
    "ErrorBody",
    "HTTPError",
    "JSONResponse",
    "Listener",
    "SideApp",
    "TrustedProxies",
    "client_ip",
    "error_response",
    "exception_handlers",
    "first_of",
    "rate_key",
    "serve",
    "until_gone",
    "while_connected",
]
