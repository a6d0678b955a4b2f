"""schemathesis against a live `marks serve`: no 5xx, and every response matches /openapi.json.

Run through schemathesis's own command line (its coverage, fuzzing and stateful phases), which
needs nothing of pytest's collection machinery.
"""

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
CHECKS = ",".join(
    [
        "not_a_server_error",
        "response_schema_conformance",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "unsupported_method",
    ]
)


def test_every_route_keeps_the_promises_of_its_schema(served):
    for number in range(5):  # something to find, change and delete
        served.add(f"https://seed.invalid/{number}", title=f"seed {number}", tags=["seed/x"])
    done = subprocess.run(
        [SCHEMATHESIS, "run", f"{served.url}/openapi.json", "--checks", CHECKS,
         "--max-examples", "20", "--seed", "7", "--request-timeout", "30", "--no-color"],
        capture_output=True, text=True, timeout=280, cwd=served.home,
        env={**os.environ, "SCHEMATHESIS_HOOKS": HOOKS.stem,
             "PYTHONPATH": os.pathsep.join([str(HOOKS.parent), os.environ.get("PYTHONPATH", "")])},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "17 selected" in done.stdout or "Operations:" in done.stdout
    # The server lived through it and still answers.
    assert served.http.get("/stats").status_code == 200
    # Link checks and page fetches it started saw only hosts that never resolve (the hooks).
    urls = [b["url"] for b in served.http.get("/bookmarks", params={"limit": 1000}).json()["items"]]
    hosts = {urlsplit(url).hostname for url in urls if url.lower().startswith("http")}
    assert all(host.endswith(".invalid") for host in hosts if host), hosts
