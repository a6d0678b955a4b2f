"""A worker's own proxy that forwards everything, with hooks to rewrite the path or the answer.

Tests use it as a worker in a pool's allowlist to play a worker that lies (a forged record, a
replayed one) while its key is the real worker's.
"""

import http.server
import threading
import urllib.error
import urllib.request


class RewritingProxy(http.server.ThreadingHTTPServer):
    def __init__(self, upstream: str) -> None:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def relay(handler, method: str) -> None:
                length = int(handler.headers.get("Content-Length") or 0)
                request = urllib.request.Request(
                    upstream + proxy.path(handler.path),
                    data=handler.rfile.read(length) if length else None,
                    method=method,
                    headers={
                        k: v
                        for k, v in handler.headers.items()
                        if k.lower() in ("content-type", "x-forwarded-for")
                    },
                )
                try:
                    with urllib.request.urlopen(request) as reply:
                        status, body, kind = reply.status, reply.read(), reply.headers
                except urllib.error.HTTPError as error:
                    status, body, kind = error.code, error.read(), error.headers
                body = proxy.answer(handler.path, body)
                handler.send_response(status)
                handler.send_header("Content-Type", kind.get("Content-Type", "application/json"))
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            def do_GET(handler) -> None:
                handler.relay("GET")

            def do_POST(handler) -> None:
                handler.relay("POST")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def path(self, path: str) -> str:
        """The path asked of the worker (the client's, unless a subclass changes it)."""
        return path

    def answer(self, path: str, body: bytes) -> bytes:
        """The body handed back (the worker's, unless a subclass changes it)."""
        return body
