"""A page served beside marks as marks' own: every request but one is relayed to a live `marks
serve` with the browser's Host, Origin and Sec-Fetch-Site as sent, so marks takes the page's
requests for same-origin ones (as it does for its web UI on loopback). The one page, `/control`,
is given HTML served without marks' headers (no sandbox, no CSP): the control of the snapshot
tests -- hostile HTML there does run and does reach the API, so a test that sees nothing happen
in the sandbox is not blind."""

import http.server
import threading
import urllib.error
import urllib.request

RELAYED = ("host", "origin", "sec-fetch-site", "referer", "content-type", "authorization")


class SameOriginPage(http.server.ThreadingHTTPServer):
    def __init__(self, upstream: str, html: str) -> None:
        page = html.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def relay(self) -> None:
                if self.path == "/control":
                    self.answer(200, "text/html; charset=utf-8", page)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                request = urllib.request.Request(
                    upstream + self.path,
                    data=self.rfile.read(length) if length else None,
                    method=self.command,
                    headers={k: v for k, v in self.headers.items() if k.lower() in RELAYED},
                )
                try:
                    with urllib.request.urlopen(request) as reply:
                        status, body, headers = reply.status, reply.read(), reply.headers
                except urllib.error.HTTPError as error:
                    status, body, headers = error.code, error.read(), error.headers
                self.answer(status, headers.get("Content-Type", "text/plain"), body)

            do_GET = do_POST = do_DELETE = do_PATCH = relay

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def __enter__(self) -> "SameOriginPage":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
