"""The domain layer reaches no HTTP code (issue 24, item 6): each domain module, imported alone in a
fresh interpreter, loads none of servekit, Starlette or hypercorn. The edge (node/app.py,
node/edge.py, the pool's modules) derives what the domain needs from a request (the client's rate
key) and passes it in; a domain module that imported servekit for one function loaded the whole
server with it."""

import json
import subprocess
import sys

import pytest

DOMAIN = ["errors", "ratelimit", "scheduling", "jobs", "manifest", "signing", "node.service"]
HTTP = ("servekit", "starlette", "hypercorn")

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
