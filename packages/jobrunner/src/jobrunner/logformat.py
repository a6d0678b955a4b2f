"""The server's log on stderr: plain lines (`text`, the default) or one JSON object per line.

Log calls that matter to an operator (a job accepted, started, finished; a request refused; the
server listening, draining, stopping) pass their facts as `extra=` fields named in `FIELDS`; the
JSON formatter writes every one of them on every line (null when a line has none), so a log
pipeline can rely on the names. `client` is never an address: it is `client_key`, a pseudonym of
the client's rate-limit key that holds only for the life of one server process.
"""

import datetime as dt
import hashlib
import hmac
import json
import logging
import secrets
import sys
from collections.abc import Callable
from typing import Literal

# Every field of a JSON line, in order. `exception` is added when the line carries a traceback.
FIELDS = (
    "time",
    "level",
    "logger",
    "event",
    "message",
    "job_id",
    "client",
    "status",
    "failure",
    "reason",
    "http_status",
    "repeated",
)
_EXTRA = FIELDS[5:]  # the fields a call site may pass in `extra=`
LogFormat = Literal["text", "json"]
_SECRET = secrets.token_bytes(32)  # per process: the pseudonyms cannot be joined across runs


def client_key(rate_key: str) -> str:
    """A pseudonym of a client's rate-limit key (its IPv4 address, or its IPv6 network): the same
    client gets the same one for as long as this process runs, and it reveals no address."""
    digest = hmac.new(_SECRET, rate_key.encode(), hashlib.sha256).hexdigest()
    return f"c-{digest[:16]}"


def rfc3339(created: float) -> str:
    moment = dt.datetime.fromtimestamp(created, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in a message or traceback are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": rfc3339(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", None) or "log",
            "message": record.getMessage(),
        }
        for name in _EXTRA:
            line[name] = getattr(record, name, None)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def configure(log_format: LogFormat) -> None:
    """Send the log to stderr in `log_format` (replacing any handler set before)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def say(log_format: LogFormat, event: str, text: str) -> None:
    """A start-up line an operator or a script reads (where the server listens, its key): alone
    on a line of stderr, or as the message of a JSON line of that event."""
    if log_format == "json":
        logging.getLogger("jobrunner").info("%s", text, extra={"event": event})
    else:
        print(text, file=sys.stderr, flush=True)


def announcer(log_format: LogFormat, what: str) -> Callable[[str], None]:
    """How a listener says where it is: `listening on URL` (or `metrics on URL`) alone on a line,
    or as the message of a JSON line of event `server.listening` / `server.metrics`."""

    def announce(url: str) -> None:
        say(log_format, f"server.{what}", f"{what} on {url}")

    return announce
