"""The metrics listener's app: `GET /metrics` in the Prometheus text format, nothing else.

It is served on a listener of its own (`--metrics HOST:PORT`), never on the public one: the
numbers are for the operator, and scraping must not count against, or be refused by, the limits
of anonymous clients.
"""

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobrunner.metrics import CONTENT_TYPE, Metrics
from servekit import exception_handlers


def build_metrics_app(metrics: Metrics) -> Starlette:
    async def scrape(request: Request) -> Response:
        if metrics.before_scrape is not None:
            await metrics.before_scrape()
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    app = Starlette(
        routes=[Route("/metrics", scrape, methods=["GET"])],
        exception_handlers=exception_handlers(),  # 404 and 405 as the JSON error body
    )
    app.router.redirect_slashes = False
    return app
