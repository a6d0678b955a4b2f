"""Loaded by schemathesis (SCHEMATHESIS_HOOKS) in test_server_openapi: no request leaves loopback.

`POST /bookmarks/health` and `POST /bookmarks/{id}/content` fetch the links stored in the library,
and schemathesis stores whatever URLs it generates. Before each call, every http(s) URL in a body
gets the host `fuzz.invalid` (RFC 6761: never resolves, and marks fails it without a DNS query),
so the server's checks and fetches stay on this machine whatever was generated.
"""

import re

import schemathesis

_WEB_URL = re.compile(r"(?i)\b(https?)://[^/?#\s\"'<>]*")
_WEB_URL_BYTES = re.compile(_WEB_URL.pattern.encode())


def _local(value):
    if isinstance(value, str):
        return _WEB_URL.sub(r"\1://fuzz.invalid", value)
    if isinstance(value, bytes):
        return _WEB_URL_BYTES.sub(rb"\1://fuzz.invalid", value)
    if isinstance(value, list):
        return [_local(item) for item in value]
    if isinstance(value, dict):
        return {key: _local(item) for key, item in value.items()}
    return value


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.body is not None:
        case.body = _local(case.body)
