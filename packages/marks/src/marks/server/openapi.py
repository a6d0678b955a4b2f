"""The OpenAPI 3.1 document, built from the endpoint declarations and the msgspec Structs."""

import re
from typing import Any

import msgspec

from marks import __version__
from marks.server.endpoint import MAX_ID, Endpoint, ErrorOut, Param

_PATH_PARAM = re.compile(r"\{(\w+)(?::(\w+))?\}")
ALWAYS = {400: "Bad request", 401: "Missing or wrong token", 403: "Refused (Host or cross-site)"}
PHRASES = {
    403: "Refused (Host or cross-site), or a browser profile path the server did not find",
    404: "Not found",
    409: "Conflict: a duplicate (existing_id names the bookmark), an item queued already, or "
    "the graph not built yet",
    413: "Body too large",
    422: "Invalid input",
    429: "Busy (another batch is running; Retry-After says when to ask again)",
}


def _param_schema(param: Param) -> dict[str, Any]:
    kind = {str: "string", int: "integer", bool: "boolean"}[param.kind]
    schema: dict[str, Any] = {"type": kind}
    if param.minimum is not None:
        schema["minimum"] = param.minimum
    if param.maximum is not None:
        schema["maximum"] = param.maximum
    if param.choices:
        schema["enum"] = list(param.choices)
    if param.default is not None:
        schema["default"] = param.default
    if kind == "string":
        schema["pattern"] = "^[^\\x00]*$"
    return schema


def _path_parameters(endpoint: Endpoint) -> tuple[str, list[dict]]:
    parameters = []
    for name, convertor in _PATH_PARAM.findall(endpoint.path):
        if convertor == "int":
            schema: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": MAX_ID}
        elif name in endpoint.choices:
            schema = {"type": "string", "enum": list(endpoint.choices[name])}
        else:
            schema = {"type": "string", "minLength": 1, "pattern": "^[^\\x00]*$"}
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    return _PATH_PARAM.sub(r"{\1}", endpoint.path), parameters


def build(endpoints: list[Endpoint]) -> dict[str, Any]:
    types: list[Any] = [ErrorOut]
    for endpoint in endpoints:
        if endpoint.body not in (None, bytes):
            types.append(endpoint.body)
        if isinstance(endpoint.response, tuple):
            types += list(endpoint.response)
        elif isinstance(endpoint.response, dict):
            types += [t for t in endpoint.response.values() if t is not str]
        elif endpoint.response not in (None, str):
            types.append(endpoint.response)
    schemas, components = msgspec.json.schema_components(
        types, ref_template="#/components/schemas/{name}"
    )
    by_type = dict(zip(types, schemas, strict=True))
    error = {"application/json": {"schema": by_type[ErrorOut]}}

    paths: dict[str, dict] = {}
    for endpoint in endpoints:
        path, parameters = _path_parameters(endpoint)
        parameters += [
            {
                "name": p.name,
                "in": "query",
                "required": p.required,
                "description": p.description,
                "schema": _param_schema(p),
            }
            for p in endpoint.params
        ]
        operation: dict[str, Any] = {
            "summary": endpoint.summary,
            "operationId": f"{endpoint.method.lower()}_{re.sub(r'[^a-z]+', '_', path).strip('_')}",
            "parameters": parameters,
            "responses": {},
        }
        if endpoint.body is bytes:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/octet-stream": {"schema": {"type": "string"}}},
            }
        elif endpoint.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": by_type[endpoint.body]}},
            }
        responses = operation["responses"]
        if endpoint.response is None:
            responses[str(endpoint.status)] = {"description": "Done"}
        elif isinstance(endpoint.response, dict):  # one body per media type (exports)
            responses[str(endpoint.status)] = {
                "description": "The file",
                "content": {
                    media: {"schema": {"type": "string"} if kind is str else by_type[kind]}
                    for media, kind in endpoint.response.items()
                },
            }
        else:
            if isinstance(endpoint.response, tuple):
                schema = {"anyOf": [by_type[t] for t in endpoint.response]}
            else:
                schema = by_type[endpoint.response]
            responses[str(endpoint.status)] = {
                "description": "OK",
                "content": {"application/json": {"schema": schema}},
            }
        statuses = {**ALWAYS, **{s: PHRASES[s] for s in endpoint.errors}}
        if endpoint.body is not None:
            statuses.setdefault(413, PHRASES[413])
            statuses.setdefault(422, PHRASES[422])
        for status, text in sorted(statuses.items()):
            responses[str(status)] = {"description": text, "content": error}
        paths.setdefault(path, {})[endpoint.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "marks",
            "version": __version__,
            "description": "The marks REST API. Send `Authorization: Token <token>` "
            "(`marks config token`) from anywhere but the web UI on loopback.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "Authorization"}
            },
        },
    }
