"""A small server built only from servekit, run as a real process by the servekit tests."""

import argparse
import asyncio
import datetime as dt
import gc

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from servekit import (
    CorsPolicy,
    HTTPError,
    JSONResponse,
    Listener,
    SideApp,
    TrustedProxies,
    client_ip,
    exception_handlers,
    serve,
)


def build(trusted: TrustedProxies, cors: CorsPolicy) -> Starlette:
    async def hello(request: Request) -> JSONResponse:
        when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
        return JSONResponse({"hello": "wörld", "when": when})

    async def boom(request: Request) -> JSONResponse:
        raise RuntimeError("secret detail from /srv/internal/path")

    async def refuse(request: Request) -> JSONResponse:
        raise HTTPError(
            429,
            "Rate limit exceeded",
            reason="3/2 jobs",
            retry_after=7,
            headers={"Retry-After": "7"},
        )

    async def slow(request: Request) -> JSONResponse:
        print("slow request started", flush=True)  # what a test waits on before it signals us
        await asyncio.sleep(float(request.query_params.get("seconds", "1")))
        return JSONResponse({"slept": True})

    async def whoami(request: Request) -> JSONResponse:
        return JSONResponse({"ip": client_ip(request, trusted)})

    async def collector(request: Request) -> JSONResponse:
        return JSONResponse({"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()})

    return Starlette(
        routes=[
            Route("/hello", hello),
            Route("/boom", boom),
            Route("/refuse", refuse, methods=["POST"]),
            Route("/slow", slow),
            Route("/whoami", whoami),
            Route("/collector", collector),
        ],
        exception_handlers=exception_handlers(),
        middleware=[cors.middleware()],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    parser.add_argument("--trust", action="append", default=[])
    parser.add_argument("--cors-only", action="append", default=None)
    parser.add_argument("--cors-extensions", action="store_true")
    parser.add_argument("--side-port", type=int, help="serve a side app there, named `side`")
    parser.add_argument("--linger", action="store_true", help="a drain that never ends by itself")
    args = parser.parse_args()
    cors = (
        CorsPolicy.only(*args.cors_only, allow_extensions=args.cors_extensions)
        if args.cors_only is not None
        else CorsPolicy.anyone(expose_headers=("Retry-After",))
    )
    app = build(TrustedProxies(args.trust), cors)
    side = []
    if args.side_port is not None:

        async def side_hello(request: Request) -> JSONResponse:
            return JSONResponse({"side": True})

        side_app = Starlette(routes=[Route("/side", side_hello)])
        side.append(SideApp(side_app, Listener("127.0.0.1", args.side_port), "side"))

    async def linger() -> None:
        print("lingering", flush=True)  # what a test waits on: the first signal was handled
        await asyncio.Event().wait()

    serve(
        app,
        Listener("127.0.0.1", args.port, args.certfile, args.keyfile),
        graceful_timeout=5,
        side=side,
        before_shutdown=linger if args.linger else None,
    )


if __name__ == "__main__":
    main()
