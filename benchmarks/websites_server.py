"""A local web server for the health and content benchmarks, in its own process.

`python websites_server.py HOSTS` serves on 127.0.0.1..HOSTS, prints `listening on PORT` and runs
until its stdin closes. `/ok...` answers 200 from a bare handler (the benchmark measures marks,
not the fake internet); `/page/NAME` serves an HTML page with text, as tests/support/websites.py.
"""

import asyncio
import socket
import sys

from aiohttp import web

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Page {name}</title>
<meta name="description" content="About page {name}"></head><body><nav>Home | About</nav>
<main><h1>Page {name}</h1>{paragraphs}</main><footer>footer</footer></body></html>"""
TEXT = "<p>The quick brown fox {name} jumps over the lazy dog, paragraph {n}.</p>"


async def handle(request: web.BaseRequest) -> web.Response:
    if request.path.startswith("/page/"):
        name = request.path.rsplit("/", 1)[-1]
        body = "".join(TEXT.format(name=name, n=n) for n in range(40))
        return web.Response(text=PAGE.format(name=name, paragraphs=body), content_type="text/html")
    return web.Response(text="fine")


async def main(hosts: int) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = web.Server(handle, access_log=None)
    loop = asyncio.get_running_loop()
    for number in range(1, hosts + 1):
        await loop.create_server(server, f"127.0.0.{number}", port, backlog=1024)
    print(f"listening on {port}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
