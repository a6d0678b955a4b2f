"""What a server was started with: the database, where it listens, and who may talk to it."""

import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path

JSON_BODY_LIMIT = 1024 * 1024  # a bookmark is a few KB; nothing sent as JSON needs more
UPLOAD_LIMIT = 256 * 1024 * 1024  # an import file: 100,000 bookmarks of browser HTML is ~40 MB


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class ServerSettings:
    db: Path
    host: str = "127.0.0.1"
    port: int = 8000
    token: str = ""
    names: tuple[str, ...] = ()  # extra Host names (a reverse proxy's, a LAN name)
    origins: tuple[str, ...] = ()  # web origins allowed cross-origin (extensions always are)
    json_limit: int = JSON_BODY_LIMIT
    upload_limit: int = UPLOAD_LIMIT
    tls: bool = False
    busy_timeout_ms: int = 30_000  # wait for the CLI's import rather than fail
    access_log: bool = False  # a line per request on stderr (`marks serve` turns it on)
    extra: dict = field(default_factory=dict)
    # The config file's values the services read: health_* options, which plugins run.
    config: dict = field(default_factory=dict)

    @property
    def snapshot_limit(self) -> int:
        """Bytes a snapshot sent by the extension may take: config `snapshot_max_mb`, plus room
        for the JSON around the page (its quotes and escapes)."""
        megabytes = float(self.config.get("snapshot_max_mb", 20))
        return int(megabytes * 1024 * 1024 * 1.25) + 65536

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def token_required(self) -> bool:
        """Bound beyond this machine, every API request carries the token."""
        return not self.loopback
