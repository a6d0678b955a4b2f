"""The OpenAPI 3.1 document of the HTTP interface, built from the msgspec Structs that encode it.

Worker and pool answer the same interface (`app.interface`), so they serve the same document.
Schemas come from `msgspec.json.schema_components` (JSON Schema 2020-12, which OpenAPI 3.1 uses
as is); this module adds only what HTTP says about them: paths, parameters, status codes, media
types and headers. Every route of `app.interface` must appear here (a test compares them).
"""

import functools
import re
from typing import Any

import msgspec

from jobrunner import __version__, wire
from servekit import ErrorBody

_JSON = "application/json"
_REF = "#/components/schemas/{name}"

# The error responses, each with the JSON error body (`RateLimitedBody` for 429).
_ERRORS = {
    400: "Bad request: `Invalid manifest` (the manifest, a file or the form itself; `details` "
    "names what), `Invalid challenge`, or `Invalid parameter` (`wait`).",
    404: "`Job not found` or `File not found`: unknown, expired or deleted.",
    409: "`Job already finished`: a finished job cannot be cancelled; its record is unchanged.",
    408: "`Request timeout`: the upload did not arrive (and unpack) within the server's "
    "`upload_timeout`.",
    413: "`Request too large`: the upload passed the server's size limit (refused as it streams).",
    426: "`Upgrade required`: this path serves only a WebSocket.",
    429: "`Rate limit exceeded`: a per-client limit (`reason` says which); `Retry-After` and "
    "`retry_after` say when to ask again.",
    500: "`Internal server error`: a bug; `details` names the failure and a reference the "
    "operator's log repeats.",
    502: "`Worker unreachable` (a pool only): the job's worker did not answer.",
    503: "`Service unavailable` (shutting down, uploads or streams at capacity, short of open "
    "files) or, from a pool, `No worker available`; usually with `Retry-After`.",
}
_RETRY_AFTER = {
    "description": "Seconds to wait before asking again.",
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}

_JOB_ID = {
    "name": "job_id",
    "in": "path",
    "required": True,
    "description": "The id `POST /submit` returned (unguessable; the only capability to a job).",
    "schema": {"type": "string", "minLength": 1},
}
_WAIT = {
    "name": "wait",
    "in": "query",
    "required": False,
    "description": "Answer as soon as the job has finished, or after this many seconds with the "
    "record as it is then (a long poll: it counts as one of the client's streams).",
    "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": 60},
}
_SUBMIT_WAIT = {
    **_WAIT,
    "description": "Submit and wait in one request: answer with the job's status record as soon "
    "as it has finished, or after this many seconds with the record as it is then (the answer "
    "names the job either way; where the wait itself fails after the job was queued, as at a "
    "pool whose worker is gone, the answer is the plain submit's). The wait counts as one of "
    "the client's streams.",
}
_FILEPATH = {
    "name": "filepath",
    "in": "path",
    "required": True,
    "description": "An output's path as `GET /outputs` lists it (`/` separates directories; "
    "percent-encode any other character that needs it, a newline included).",
    "schema": {"type": "string", "minLength": 1},
}
_CHALLENGE = {
    "name": "challenge",
    "in": "query",
    "required": False,
    "description": "A nonce to sign: the answer's `challenge_signature` is the worker's Ed25519 "
    "signature of `jobrunner-challenge-v1` and the nonce as netstrings (README, Signatures).",
    "schema": {"type": "string", "minLength": 1, "maxLength": 256},
}

_DESCRIPTION = """\
Anonymous job execution: upload a gzip tarball (or plain files) and a JSON manifest; the job runs
in an nsjail sandbox; its status, log (plain, and live over a WebSocket), outputs and downloads are
served by job id. A pool of workers answers the same interface.

Every error is the JSON body `{"error": ..., "details": ...}` (a 429 adds `reason` and
`retry_after`). A method a path does not list answers `405` with that body and an `Allow` header
(`components.responses.MethodNotAllowed`).

OpenAPI cannot describe WebSockets: see `GET /logs/{job_id}/stream` for the live log.
"""

_STREAM = """\
A WebSocket (`ws://` or `wss://`; connect with `Upgrade: websocket`). The server sends the log so
far, then each new chunk, as text messages (UTF-8, invalid bytes replaced), and closes with code
1000 and the final status (`completed` or `failed`) as the reason when the job ends. Unknown job:
close 4404 `Job not found`. A reader more than 1 MiB behind a live log, or one that takes nothing
for the server's stall time, is closed 1013. A client over its stream limit gets the handshake
refused with the `429` below (or, behind a server without denial responses, close 1013).

A plain HTTP request here answers `426 Upgrade required`.
"""


def _patterns_for_ecma(schema: Any) -> Any:
    """The schema with Python's end-of-text `\\Z` spelled `$`, which is the same in ECMA-262 (the
    regex dialect of JSON Schema): the wire patterns use `\\Z` because Python's `$` also matches
    before a final newline; ECMA's `\\Z` would be a literal `Z`."""
    if isinstance(schema, dict):
        return {
            key: re.sub(r"\\Z$", "$", value)
            if key == "pattern" and isinstance(value, str)
            else _patterns_for_ecma(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_patterns_for_ecma(item) for item in schema]
    return schema


def _json(description: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema}}, **extra}


def _errors(*statuses: int) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status in (*statuses, 500):
        body = wire.RateLimitedBody if status == 429 else ErrorBody
        response = _json(_ERRORS[status], {"$ref": _REF.format(name=body.__name__)})
        if status == 429:
            response["headers"] = {"Retry-After": {**_RETRY_AFTER, "required": True}}
        elif status == 503:
            response["headers"] = {"Retry-After": _RETRY_AFTER}
        elif status == 426:
            response["headers"] = {
                "Upgrade": {"required": True, "schema": {"type": "string", "const": "websocket"}}
            }
        responses[str(status)] = response
    return responses


def _operation(
    operation_id: str,
    summary: str,
    ok: dict[str, Any],
    errors: tuple[int, ...] = (),
    parameters: tuple[dict[str, Any], ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": list(parameters),
        "responses": {**ok, **_errors(*errors)},
        **extra,
    }


def _ref(struct: type) -> dict[str, str]:
    return {"$ref": _REF.format(name=struct.__name__)}


def _submit_body() -> dict[str, Any]:
    """`multipart/form-data`: the manifest as a JSON object in its own part (OpenAPI 3.1 sends an
    object-typed multipart property as `application/json`), and the upload as `files` parts."""
    form = {
        "type": "object",
        "required": ["manifest", "files"],
        "properties": {
            "manifest": {
                **_ref(wire.Manifest),
                "description": "The manifest as JSON text (a plain field or a file part).",
            },
            "files": {
                "type": "array",
                "description": "One gzip tarball (`.tar.gz`/`.tgz`), or plain files (each part "
                "named by its filename), at most 32 parts.",
                "items": {"type": "string", "contentMediaType": "application/octet-stream"},
            },
        },
    }
    return {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": form,
                "encoding": {"manifest": {"contentType": _JSON}},
            }
        },
    }


def _paths() -> dict[str, Any]:
    job = (_JOB_ID,)
    return {
        "/": {
            "get": _operation(
                "info",
                "What this server is, its privacy rules and limits",
                {"200": _json("The server", _ref(wire.ServerInfo))},
            )
        },
        "/submit": {
            "post": _operation(
                "submit",
                "Upload a job and queue it (and, with `wait`, wait for its end)",
                {
                    "200": _json(
                        "Queued: the job's id and position; with `wait`, the job's status record "
                        "(signed once finished), as `GET /status/{job_id}?wait=S` answers",
                        {"anyOf": [_ref(wire.SubmitResult), _ref(wire.StatusRecord)]},
                    )
                },
                (400, 408, 413, 429, 503),
                (_SUBMIT_WAIT,),
                requestBody=_submit_body(),
            )
        },
        "/status/{job_id}": {
            "get": _operation(
                "status",
                "The job's status record (signed once finished)",
                {"200": _json("The record", _ref(wire.StatusRecord))},
                (400, 404, 429, 502, 503),
                (_JOB_ID, _WAIT),
            )
        },
        "/jobs/{job_id}": {
            "delete": _operation(
                "cancel",
                "Cancel a queued or running job",
                {
                    "200": _json(
                        "The final record: failed, `failure: cancelled`", _ref(wire.StatusRecord)
                    )
                },
                (404, 409, 502),
                job,
            )
        },
        "/logs/{job_id}": {
            "get": _operation(
                "logs",
                "The job's combined stdout and stderr so far",
                {
                    "200": {
                        "description": "The log (UTF-8, invalid bytes replaced); counts as a "
                        "stream of the client while it is sent.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
                (404, 429, 502, 503),
                job,
            )
        },
        "/logs/{job_id}/stream": {
            "get": _operation(
                "logs_stream",
                "The live log, over a WebSocket",
                {
                    "101": {
                        "description": "Switching protocols: the WebSocket described above.",
                    }
                },
                (426, 429, 503),
                job,
                description=_STREAM,
            )
        },
        "/outputs/{job_id}": {
            "get": _operation(
                "outputs",
                "The job's output files and directories",
                {"200": _json("The listing", _ref(wire.OutputListing))},
                (404, 502),
                job,
            )
        },
        "/download/{job_id}/{filepath}": {
            "get": _operation(
                "download",
                "One output file",
                {
                    "200": {
                        "description": "The file's bytes, with the media type its name suggests. "
                        "Once every output was downloaded the job is deleted shortly after.",
                        "headers": {
                            "Content-Disposition": {
                                "required": True,
                                "schema": {"type": "string"},
                            }
                        },
                        "content": {"*/*": {}},
                    }
                },
                (404, 429, 502, 503),
                (_JOB_ID, _FILEPATH),
            )
        },
        "/stats": {
            "get": _operation(
                "stats",
                "Your quota and the system's load",
                {"200": _json("The stats", _ref(wire.Stats))},
            )
        },
        "/environments": {
            "get": _operation(
                "environments",
                "Environment templates and interpreters",
                {"200": _json("The environments", _ref(wire.Environments))},
                (503,),  # a pool without a healthy worker
            )
        },
        "/health": {
            "get": _operation(
                "health",
                "Health, and proof of the worker's key",
                {
                    "200": _json(
                        "Healthy (a pool: `degraded` without a healthy worker)", _ref(wire.Health)
                    ),
                    # Not an error body: the signed health answer, so that a pool keeps
                    # trusting (and collecting from) a worker that is shutting down.
                    "503": _json(
                        "`draining`: shutting down; it takes no new job and serves its finished "
                        "ones until they are collected",
                        _ref(wire.Health),
                    ),
                },
                (400,),
                (_CHALLENGE,),
            )
        },
        "/openapi.json": {
            "get": _operation(
                "openapi",
                "This document",
                {"200": _json("OpenAPI 3.1", {"type": "object"})},
            )
        },
    }


def build() -> dict[str, Any]:
    """The document as a JSON-ready dict."""
    structs = [
        ErrorBody,
        wire.RateLimitedBody,
        wire.Manifest,
        wire.ServerInfo,
        wire.SubmitResult,
        wire.StatusRecord,
        wire.OutputListing,
        wire.Stats,
        wire.Environments,
        wire.Health,
    ]
    _, components = msgspec.json.schema_components(structs, ref_template=_REF)
    method_not_allowed = _json(
        "`Method not allowed`: the path exists, the method does not.",
        _ref(ErrorBody),
        headers={"Allow": {"required": True, "schema": {"type": "string"}}},
    )
    return {
        "openapi": "3.1.0",
        "info": {"title": "jobrunner", "version": __version__, "description": _DESCRIPTION},
        "paths": _paths(),
        "components": {
            "schemas": _patterns_for_ecma(components),
            "responses": {"MethodNotAllowed": method_not_allowed},
        },
    }


@functools.cache
def document() -> bytes:
    """The document as JSON bytes, built once per process."""
    return msgspec.json.encode(build())
