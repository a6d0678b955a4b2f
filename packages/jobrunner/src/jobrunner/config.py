"""Server and pool settings: defaults are the interface's limits; a TOML file, variables
(JOBRUNNER_* for the server, JOBRUNNER_POOL_* for the pool) and command-line options override
them, in that order of increasing precedence. Every field is also a command-line option of the
same name (`jobrunner serve`, `jobrunner pool`), with a help text."""

import os
import re
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec

S = TypeVar("S", bound=msgspec.Struct)
Positive = Annotated[int, msgspec.Meta(ge=1)]


def default_state_dir() -> str:
    if os.geteuid() == 0:
        return "/var/lib/jobrunner"
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "jobrunner")


def default_concurrency() -> int:
    """One job slot per CPU, and one more. A slot holds a core only while its jail runs: between
    two jobs (the teardown, the next set-up, the server's share of each job, about a fifth of a
    hello world's cycle) its core would idle, and with a slot per core the host stayed 12 to 17 %
    idle under a full queue of trivial jobs. One more slot kept it 7 to 9 % idle: 6 to 13 % more
    jobs a second on this project's 2-core host (see the README's "Decisions for speed")."""
    return (os.cpu_count() or 1) + 1


class Settings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8080
    state_dir: str = msgspec.field(default_factory=default_state_dir)
    # 0 only with `cluster`: a front end that runs nothing. One slot more than the CPUs by
    # default (`default_concurrency`).
    concurrency: Annotated[int, msgspec.Meta(ge=0)] = msgspec.field(
        default_factory=default_concurrency
    )
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
    # Operators: GET /metrics on a listener of its own (HOST:PORT; off unless given), and the
    # format of the log on stderr (`json`: one object per line, see `jobrunner.logformat`).
    metrics: str | None = None
    log_format: Literal["text", "json"] = "text"
    # Several machines (cluster/): the Valkey/Redis URL that makes this node one of a cluster,
    # the URL the other nodes reach this one on (derived from host and port when concrete), the
    # seconds after which a silent node's running jobs are `worker_lost`, the bytes of uploads
    # the cluster holds for queued jobs at most (beyond: 503, as a full queue), and how long a
    # job runs before its node writes its start (`cluster.claiming`: most jobs end sooner).
    cluster: str | None = None
    advertise: str | None = None
    lost_after: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    cluster_upload_mb: Annotated[int, msgspec.Meta(ge=1)] = 1024
    start_after: Annotated[float, msgspec.Meta(ge=0)] = 0.25

    @property
    def state(self) -> Path:
        return Path(self.state_dir)

    @property
    def reserved(self) -> int:
        """Slots kept for short jobs: `reserved_slots`, or all but a quarter of the slots (the
        quarter at least one): 3 of 4, 1 of 2, none of 1."""
        if self.reserved_slots is not None:
            return self.reserved_slots
        return max(0, self.concurrency - max(1, self.concurrency // 4))


class PoolSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    workers: str  # the allowlist (TOML): [[worker]] url, key, capacity
    host: str = "127.0.0.1"
    port: int = 8090
    state_dir: str = msgspec.field(default_factory=lambda: default_state_dir() + "-pool")
    certfile: str | None = None
    keyfile: str | None = None
    trusted_proxies: list[str] = []
    health_interval: Annotated[float, msgspec.Meta(gt=0)] = 2.0
    rate_concurrent: int = 2
    rate_per_hour: int = 20
    rate_cpu_seconds: float = 10.0
    rate_streams: Positive = 8
    rate_ipv6_prefix: Annotated[int, msgspec.Meta(ge=0, le=128)] = 64
    lost_after: Positive = 3
    max_streams: Positive = 1000
    max_uploads: Positive = 32
    write_timeout: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    retention: Annotated[float, msgspec.Meta(ge=0)] = 600.0
    metrics: str | None = None  # GET /metrics on a listener of its own (HOST:PORT)
    log_format: Literal["text", "json"] = "text"


# Where a value comes from on the command line when the option's name is not the key's.
_OPTION_NAMES = {"trusted_proxies": "--trusted-proxy"}


def _from_environment(kind: type[msgspec.Struct], prefix: str) -> dict[str, Any]:
    """JOBRUNNER_PORT=9000, JOBRUNNER_TRUSTED_PROXIES=10.0.0.1,10.0.0.2, ... (a list is
    comma-separated)."""
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(kind):
        raw = os.environ.get(prefix + field.name.upper())
        if raw is None:
            continue
        is_list = typing.get_origin(field.type) is list
        values[field.name] = raw.split(",") if is_list else raw
    return values


def load(config_file: Path | None = None, **overrides: Any) -> Settings:
    """The server's settings; a wrong key or type is a clear error naming it and where it came
    from (`JOBRUNNER_PORT`, `--port`, or the key in the config file)."""
    return _merge(Settings, "JOBRUNNER_", config_file, overrides)


def load_pool(config_file: Path | None = None, **overrides: Any) -> PoolSettings:
    """The pool's settings, the same way; its variables are JOBRUNNER_POOL_* so that a worker
    and a pool on one host do not take each other's (JOBRUNNER_PORT)."""
    return _merge(PoolSettings, "JOBRUNNER_POOL_", config_file, overrides)


def _merge(kind: type[S], prefix: str, config_file: Path | None, overrides: dict[str, Any]) -> S:
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
    environment = _from_environment(kind, prefix)
    values.update(environment)
    source.update({key: f"${prefix}{key.upper()}" for key in environment})
    given = {key: value for key, value in overrides.items() if value is not None}
    values.update(given)
    source.update({key: _option(key) for key in given})
    try:
        settings = msgspec.convert(values, kind, strict=False)
    except msgspec.ValidationError as error:
        message = str(error)
        if missing := re.search(r"missing required field `(\w+)`", message):
            key = missing.group(1)
            raise ValueError(
                f"missing setting: give {_option(key)} (or `{key}` in the --config file, "
                f"or ${prefix}{key.upper()})"
            ) from None
        raise ValueError(f"invalid setting: {_located(message, source)}") from None
    if isinstance(settings, Settings) and settings.concurrency == 0 and not settings.cluster:
        raise ValueError(
            "invalid setting: --concurrency 0 (a front end that runs nothing) needs --cluster"
        )
    metrics = getattr(settings, "metrics", None)  # the server's and the pool's
    if metrics is not None:
        where = source.get("metrics", "`metrics`").replace("{}", "metrics")
        metrics_address(metrics, getattr(settings, "port", 0), where)
    return settings


def metrics_address(text: str, public_port: int, where: str = "--metrics") -> tuple[str, int]:
    """HOST:PORT of the metrics listener (`[::1]:9100` for IPv6). It may never be the public
    port: the metrics are for the operator, not for the anonymous clients of that port."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"invalid setting: {where}: expected HOST:PORT, got {text!r}")
    if int(port) != 0 and int(port) == public_port:
        raise ValueError(
            f"invalid setting: {where}: the metrics listener may not use the public port "
            f"{public_port}; give it a port of its own"
        )
    return host, int(port)


def _option(key: str) -> str:
    return _OPTION_NAMES.get(key, "--" + key.replace("_", "-"))


def _located(message: str, source: dict[str, str]) -> str:
    """msgspec's message with the setting's origin: `$.port` becomes `JOBRUNNER_PORT`."""
    match = re.search(r"at `\$\.(\w+)", message) or re.search(r"unknown field `(\w+)`", message)
    if match is None:
        return message
    key = match.group(1)
    where = source.get(key, f"`{key}`").replace("{}", key)
    return f"{where}: {message}"
