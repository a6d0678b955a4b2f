"""`/graph`: build the bookmark graph, its stats, a bookmark's neighbours, exports.

Everything goes through `marks.graph`, the service behind `marks graph`. A build runs in the
background (`graph_builds.py`: 202 with an id, one at a time); reading the graph before any build
is the CLI's error ("the graph is not built yet") as a 409.
"""

from typing import TextIO

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from marks.graph import GraphStats, Neighbour, NodeLinkGraph, query
from marks.graph import export as graph_export
from marks.library import Library, NotFound
from marks.server import streaming
from marks.server.endpoint import Call, Endpoint, Libraries, Param, in_thread
from marks.server.graph_builds import BuildProgress
from marks.server.settings import ServerSettings
from servekit import HTTPError

MEDIA = {
    "gexf": "application/gexf+xml",
    "graphml": "application/graphml+xml",
    "json": "application/json",
}


def start_build(library: Library, call: Call) -> BuildProgress:
    return call.server.graph_builds.start()


def build_progress(library: Library, call: Call) -> BuildProgress:
    build_id = call.path["build_id"]
    found = call.server.graph_builds.get(build_id)
    if found is None:
        raise NotFound(f"no graph build {build_id[:40]!r} (finished builds are kept a while)")
    return found


def stats(library: Library, call: Call) -> GraphStats:
    return query.stats(library.store)


def neighbours(library: Library, call: Call) -> list[Neighbour]:
    return query.neighbours(library.store, call.path["id"], call.query["limit"])


async def export(request: Request, libraries: Libraries, settings: ServerSettings) -> Response:
    fmt = request.path_params["format"]
    if fmt not in graph_export.FORMATS:
        raise HTTPError(404, "Not found", f"no graph export format {fmt!r}")
    # Refused before the headers go out: once streaming, an error could only cut the file short.
    await in_thread(libraries, lambda library: query.require_built(library.store))

    def write(library: Library, out: TextIO) -> None:
        graph_export.export(library.store, fmt, out)

    return StreamingResponse(
        streaming.stream(settings, write, name="marks-graph-export"),
        media_type=MEDIA[fmt],
        headers={"Content-Disposition": f'attachment; filename="marks-graph.{fmt}"'},
    )


ENDPOINTS = [
    Endpoint("POST", "/graph/build", "Build the graph in the background (202 with its id; 429 "
             "while another build runs)", start_build, status=202, response=BuildProgress,
             errors=(429,)),
    Endpoint("GET", "/graph/build/{build_id}", "A graph build's step and, once done, its report",
             build_progress, response=BuildProgress, errors=(404,)),
    Endpoint("GET", "/graph/stats", "Nodes, edges, components, density, the most connected "
             "(409 before the first build)", stats, response=GraphStats, errors=(409,)),
    Endpoint("GET", "/graph/neighbors/{id:int}", "A bookmark's closest bookmarks, the weight "
             "and why", neighbours,
             (Param("limit", int, 10, "at most this many (1-1000)", 1, 1000),),
             response=list[Neighbour], errors=(404, 409)),
    Endpoint("GET", "/graph/export/{format}", "The graph as GEXF, GraphML or node-link JSON "
             "(streamed)", export,
             response={MEDIA["gexf"]: str, MEDIA["graphml"]: str, MEDIA["json"]: NodeLinkGraph},
             raw=True, errors=(404, 409), choices={"format": graph_export.FORMATS}),
]  # fmt: skip
