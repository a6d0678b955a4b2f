"""The package's layout. The domain layer reaches no HTTP code (issue 24, item 6): each domain
module, imported alone in a fresh interpreter, loads none of servekit, Starlette or hypercorn. The
edge (node/app.py, node/edge.py, the pool's modules) derives what the domain needs from a request
(the client's rate key) and passes it in; a domain module that imported servekit for one function
loaded the whole server with it. And no module is over the project's 600 lines (one module, one
job): the node's service (799), the cluster node (609) and the pool coordinator (607) were."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

DOMAIN = ["errors", "ratelimit", "scheduling", "jobs", "manifest", "signing", "node.service"]
PACKAGES = ("jobrunner", "servekit")
HTTP = ("servekit", "starlette", "hypercorn")
# The sources of this checkout (not the installed package), so that the rule can be checked in a
# scratch checkout of another commit too.
SOURCES = [Path(__file__).resolve().parents[2] / "packages" / name / "src" for name in PACKAGES]
MAX_LINES = 600  # the project's rule: a module over this is a review finding

_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[2:])))
"""


@pytest.mark.parametrize("module", DOMAIN)
def test_a_domain_module_loads_no_http_code(module):
    probe = [sys.executable, "-c", _PROBE, f"jobrunner.{module}", *HTTP]
    result = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(result.stdout)
    assert loaded == [], f"importing jobrunner.{module} loaded {loaded}"


def test_no_module_is_over_the_projects_600_lines():
    sizes = {
        str(path.relative_to(root)): len(path.read_text().splitlines())
        for root in SOURCES
        for path in sorted(root.rglob("*.py"))
    }
    assert len(sizes) > 50  # the sources were found
    over = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert over == {}, f"modules over {MAX_LINES} lines (split them by what they hold): {over}"
