"""Server settings: defaults are the interface's limits; a TOML file, JOBRUNNER_* variables and
command-line options override them, in that order of increasing precedence."""

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

import msgspec


def default_state_dir() -> str:
    if os.geteuid() == 0:
        return "/var/lib/jobrunner"
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "jobrunner")


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8080
    state_dir: str = msgspec.field(default_factory=default_state_dir)
    concurrency: int = msgspec.field(default_factory=lambda: os.cpu_count() or 1)
    certfile: str | None = None
    keyfile: str | None = None
    trusted_proxies: list[str] = []
    unsafe_no_sandbox: bool = False
    templates_dir: str | None = None  # TOML files here replace packaged templates of that name
    # Running jobs are host uids jail_uid_base, jail_uid_base + 1, ... (one per job slot).
    jail_uid_base: int = 2_000_000_000
    # Per client IP (the interface's limits).
    rate_concurrent: int = 2
    rate_per_hour: int = 20
    rate_cpu_seconds: float = 10.0
    rate_cpu_window: float = 60.0
    rate_ipv6_prefix: int = 64  # IPv6 clients are counted by this network (one host has a /64)
    rate_streams: int = 8  # log streams (GET /logs, the WebSocket) and downloads open at once
    # The queue (scheduling.py): a free slot goes to the queued client whose jobs held the least
    # slot time in the last `fair_window` seconds; while short clients are about, the jobs that
    # are not short (a time limit, or an average so far, over `short_job` seconds) run in at most
    # `concurrency - reserved_slots` slots (default: a quarter of them, at least one). Beyond
    # `max_queue` queued jobs a submit is refused (503, Retry-After).
    fair_window: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    short_job: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    reserved_slots: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_queue: Annotated[int, msgspec.Meta(ge=1)] = 1000
    # Per job.
    max_timeout: int = 300
    max_memory_mb: int = 512
    storage_mb: int = 100
    max_entries: int = 10_000
    max_upload_mb: int = 50
    max_outputs: int = 1000
    log_cap_mb: int = 10
    # Deletion: after every output was downloaded, and at the latest after finishing.
    delete_after_download: float = 60.0
    retention: float = 600.0
    shutdown_grace: float = 30.0
    # Clients: a whole upload must arrive within this; a log follower that takes nothing for
    # `follower_stall` seconds is closed with 1013; a connection whose client takes nothing of
    # what it is sent (a download, a plain log) for `write_timeout` seconds is dropped.
    upload_timeout: float = 60.0
    follower_stall: float = 10.0
    write_timeout: Annotated[float, msgspec.Meta(gt=0)] = 30.0

    @property
    def state(self) -> Path:
        return Path(self.state_dir)

    @property
    def reserved(self) -> int:
        """Slots kept for short jobs: `reserved_slots`, or all but a quarter of the slots (the
        quarter at least one): 3 of 4, 1 of 2, none of 1."""
        if self.reserved_slots is not None:
            return self.reserved_slots
        return self.concurrency - max(1, self.concurrency // 4)


def _from_environment() -> dict[str, Any]:
    """JOBRUNNER_PORT=9000, JOBRUNNER_TRUSTED_PROXIES=10.0.0.1,10.0.0.2, ..."""
    fields = {
        name: typ
        for name, typ in zip(
            Settings.__struct_fields__, msgspec.structs.fields(Settings), strict=True
        )
    }
    values: dict[str, Any] = {}
    for name in fields:
        raw = os.environ.get(f"JOBRUNNER_{name.upper()}")
        if raw is None:
            continue
        values[name] = raw.split(",") if name == "trusted_proxies" else raw
    return values


def load(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Merge the sources; a wrong key or type is a clear error naming it and where it came from
    (`JOBRUNNER_PORT`, `--port`, or the key in the config file)."""
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    if config_file is not None:
        try:
            from_file = tomllib.loads(config_file.read_text())
        except tomllib.TOMLDecodeError as error:
            raise ValueError(
                f"invalid setting: {config_file} is not valid TOML ({error})"
            ) from None
        values.update(from_file)
        source.update(dict.fromkeys(from_file, f"`{{}}` in {config_file}"))
    environment = _from_environment()
    values.update(environment)
    source.update({key: f"${_variable(key)}" for key in environment})
    given = {key: value for key, value in overrides.items() if value is not None}
    values.update(given)
    source.update({key: "--" + key.replace("_", "-") for key in given})
    try:
        return msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as error:
        raise ValueError(f"invalid setting: {_located(str(error), source)}") from None


def _variable(key: str) -> str:
    return f"JOBRUNNER_{key.upper()}"


def _located(message: str, source: dict[str, str]) -> str:
    """msgspec's message with the setting's origin: `$.port` becomes `JOBRUNNER_PORT`."""
    match = re.search(r"at `\$\.(\w+)", message) or re.search(r"unknown field `(\w+)`", message)
    if match is None:
        return message
    key = match.group(1)
    where = source.get(key, f"`{key}`").replace("{}", key)
    return f"{where}: {message}"
