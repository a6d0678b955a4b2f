"""JSON responses encoded by msgspec, so Structs, datetimes and dicts all serialise the same way."""

from typing import Any

import msgspec
from starlette.responses import Response

_encoder = msgspec.json.Encoder()


class JSONResponse(Response):
    """A JSON response whose body is any value msgspec can encode (Structs included)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _encoder.encode(content)
