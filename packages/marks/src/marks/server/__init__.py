"""`marks serve`: the REST API and the web UI, a thin front end over `marks.library`.

One module, one job: `settings` (what the server was started with), `security` (Host guard,
tokens, cross-site writes, body caps), `endpoint` (how a route is declared, run and documented),
one `routes_*` module per resource, `openapi` (the document built from the declarations), and
`app` (putting it together). A capability adds its REST endpoints as one more `routes_*` module
listed in `app.MODULES`, and its web view as one more file under `static/views/`.
"""

from marks.server.app import make_app
from marks.server.settings import ServerSettings

__all__ = ["ServerSettings", "make_app"]
