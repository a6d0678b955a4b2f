"""GET /openapi.json: a valid OpenAPI 3.1 document of every route, kept by the live servers.

The document is checked against the OpenAPI 3.1 schema (schemathesis refuses an invalid one) and
its JSON Schemas against the 2020-12 meta-schema; every route of the worker's and the pool's app
must be in it; and schemathesis drives a live worker (real nsjail) and a live pool with it: no 5xx,
and every response's status, body, media type and headers as documented.
"""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import jsonschema_rs
import schemathesis
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute

from jobrunner.config import Settings
from jobrunner.node.app import build_app
from jobrunner.node.service import JobService
from jobrunner.pool.app import build_pool_app
from jobrunner.pool.coordinator import Pool
from jobrunner.signing import WorkerKey
from servekit import TrustedProxies
from support.fakerunner import FakeRunner, Served, serving, steps
from support.jobclient import run_job, submit, tarball
from support.servers import ServerProcess

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "response_schema_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "unsupported_method",
    ]
)
# Its output at the top: schemathesis never puts a `/` in a generated path parameter.
JOB = "open('a.txt', 'w').write('A')\nprint('hi')\n"


def fetch_document(tmp_path: Path) -> dict:
    async def main() -> dict:
        async with serving(tmp_path / "state") as served, httpx.AsyncClient() as client:
            reply = await client.get(f"{served.url}/openapi.json")
            assert reply.status_code == 200
            assert reply.headers["content-type"] == "application/json"
            return reply.json()

    return asyncio.run(main())


def test_the_document_is_valid_openapi_3_1(tmp_path):
    document = fetch_document(tmp_path)
    assert document["openapi"] == "3.1.0"
    schemathesis.openapi.from_dict(document).validate()  # the OpenAPI 3.1 schema, or raises
    for schema in document["components"]["schemas"].values():
        jsonschema_rs.meta.validate(schema)  # JSON Schema 2020-12
    # Every schema compiles (its patterns are ECMA-262 regexes), with the components it names.
    for name in document["components"]["schemas"]:
        jsonschema_rs.validator_for(
            {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
        )


def documented_operations(document: dict) -> set[tuple[str, str]]:
    return {(path, method.upper()) for path, item in document["paths"].items() for method in item}


def routed_operations(app: Starlette) -> set[tuple[str, str]]:
    """(path, method) of every HTTP route, the path as OpenAPI spells it (`{filepath}`), and
    GET for each WebSocket route (documented as its plain-HTTP answer, 426)."""
    found = set()
    for route in app.routes:
        assert isinstance(route, Route | WebSocketRoute), route
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        if isinstance(route, WebSocketRoute):
            found.add((path, "GET"))
        else:
            found |= {(path, method) for method in route.methods or () if method != "HEAD"}
    return found


def test_every_route_of_the_worker_and_the_pool_is_documented(tmp_path):
    document = fetch_document(tmp_path)
    settings = Settings(state_dir=str(tmp_path / "w"))
    key = WorkerKey.load_or_create(tmp_path / "worker.key")
    worker = build_app(JobService(settings, FakeRunner(), key), TrustedProxies(()))
    pool = build_pool_app(Pool(workers=[], key=key), TrustedProxies(()))
    assert routed_operations(worker) == documented_operations(document)
    assert routed_operations(pool) == documented_operations(document)


def test_error_bodies_match_the_document(tmp_path):
    """The refusals schemathesis cannot provoke on a generous server: a 429 with its extra
    fields and Retry-After, a 413, a 426 with Upgrade, a 405 with Allow."""

    async def scenario(served: Served) -> None:
        async with httpx.AsyncClient() as client:
            document = (await client.get(f"{served.url}/openapi.json")).json()

            def check(reply: httpx.Response, path: str, method: str = "get") -> None:
                responses = document["paths"][path][method]["responses"]
                documented = responses[str(reply.status_code)]
                schema = documented["content"]["application/json"]["schema"]
                validator = jsonschema_rs.validator_for(
                    {**schema, "components": document["components"]}
                )
                validator.validate(reply.json())
                for name, header in documented.get("headers", {}).items():
                    if header.get("required"):
                        assert name in reply.headers, (name, reply.headers)
                        jsonschema_rs.validate(header["schema"], reply.headers[name])

            # A job that holds the client's one slot until the test ends: the next submit is a 429.
            manifest = json.dumps({"entrypoint": "main.json", "interpreter": "python"})
            files = {"files": ("job.tar.gz", tarball({"main.json": steps({"wait": "end"})}))}
            first = await client.post(
                f"{served.url}/submit", files=files, data={"manifest": manifest}
            )
            assert first.status_code == 200, first.text
            refused = await client.post(
                f"{served.url}/submit", files=files, data={"manifest": manifest}
            )
            assert refused.status_code == 429, refused.text
            check(refused, "/submit", "post")
            big = await client.post(
                f"{served.url}/submit",
                content=b"x" * (2 * 2**20),
                headers={"content-type": "multipart/form-data; boundary=x"},
            )
            assert big.status_code == 413
            check(big, "/submit", "post")
            plain = await client.get(f"{served.url}/logs/{first.json()['job_id']}/stream")
            assert plain.status_code == 426
            check(plain, "/logs/{job_id}/stream")
            missing = await client.get(f"{served.url}/status/nothing-here")
            check(missing, "/status/{job_id}")
            bad = await client.get(f"{served.url}/health", params={"challenge": "x" * 300})
            check(bad, "/health")
            wrong = await client.delete(f"{served.url}/stats")
            assert wrong.status_code == 405 and "GET" in wrong.headers["allow"]
            jsonschema_rs.validator_for(
                {
                    **document["components"]["responses"]["MethodNotAllowed"]["content"][
                        "application/json"
                    ]["schema"],
                    "components": document["components"],
                }
            ).validate(wrong.json())

    async def main() -> None:
        async with serving(tmp_path / "state", rate_concurrent=1, max_upload_mb=1) as served:
            await scenario(served)

    asyncio.run(main())


# --- schemathesis against live servers ----------------------------------------------------------


def run_schemathesis(url: str, job_id: str, home: Path, *servers: ServerProcess) -> None:
    """schemathesis's coverage, fuzzing and stateful phases against `url`, bounded (examples per
    operation, one request's time, the whole run's time). Half the generated job ids are a real
    finished job's, and half the output paths its real output, so the success answers are
    checked too, not only the 404s."""
    home.mkdir(exist_ok=True)
    config = home / "schemathesis.toml"
    config.write_text(
        "[cache]\nenabled = false\n"  # no crash store in the working directory
        f"[dictionaries.jobs]\nvalues = [{json.dumps(job_id)}]\n"
        '[dictionaries.outputs]\nvalues = ["a.txt"]\n'
        "[parameters]\n"
        '"path.job_id" = { dictionary = "jobs", probability = 0.5 }\n'
        '"path.filepath" = { dictionary = "outputs", probability = 0.5 }\n'
    )
    done = subprocess.run(
        [SCHEMATHESIS, "--config-file", str(config), "--no-color", "run", f"{url}/openapi.json",
         "--checks", CHECKS, "--max-examples", "10", "--seed", "7", "--request-timeout", "30"],
        capture_output=True, text=True, timeout=240, cwd=home, env=dict(os.environ),
    )  # fmt: skip
    logs = "".join(server.output[-4000:] for server in servers)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-2000:] + logs
    # Every documented operation but the document itself (schemathesis leaves its own source out).
    document = httpx.get(f"{url}/openapi.json").json()
    assert f"Tested: {len(documented_operations(document)) - 1}\n" in done.stdout, done.stdout


def finished_job(url: str) -> str:
    record = run_job(url, JOB)
    assert record["status"] == "completed", record
    return str(record["job_id"])


def test_schemathesis_finds_nothing_against_a_live_worker(server: ServerProcess, tmp_path):
    run_schemathesis(server.url, finished_job(server.url), tmp_path / "st", server)
    assert httpx.get(f"{server.url}/stats").status_code == 200  # it lived through it


def test_schemathesis_finds_nothing_against_a_live_pool(cluster, tmp_path):
    # Health checks every 5 s with a 5 s timeout (the fixture's 0.3 s gives them 2 s): on a loaded
    # machine one slow check marks the worker unhealthy, and the pool then answers a documented
    # 503 `No worker available`, which `not_a_server_error` counts like any 5xx.
    limits = ["--rate-concurrent", "1000", "--rate-streams", "1000", "--health-interval", "5"]
    pool, workers = cluster(workers=1, pool_args=limits)
    job_id = finished_job(pool.url)
    run_schemathesis(pool.url, job_id, tmp_path / "st", pool, *workers)
    assert httpx.get(f"{pool.url}/stats").status_code == 200
    assert submit(pool.url, {"main.py": "pass"}, {"entrypoint": "main.py"}).status_code == 200
