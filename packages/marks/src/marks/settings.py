"""Where marks keeps things (XDG) and the TOML config: known keys, checked types, atomic writes."""

import os
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from marks import limits, paths
from marks.exceptions import MarksError
from marks.userdirs import user_dir

if TYPE_CHECKING:  # every command loads the settings; pathlib only where a Path is asked for
    from pathlib import Path

APP = "marks"
OUTPUTS = ("table", "json", "csv", "urls", "plain")


class ConfigError(MarksError):
    pass


# XDG on Linux, each platform's own rules elsewhere (see marks.userdirs). Each as text (what
# every command uses, see marks.paths) and as a Path.
def config_file() -> str:
    return paths.tidy(os.path.join(user_dir("config"), "config.toml"))


def config_path() -> "Path":
    from pathlib import Path

    return Path(config_file())


def data_dir() -> "Path":
    from pathlib import Path

    return Path(user_dir("data"))


def state_file(name: str) -> str:
    return paths.tidy(os.path.join(user_dir("state"), name))


def state_dir() -> "Path":
    from pathlib import Path

    return Path(user_dir("state"))


def cache_file(name: str) -> str:
    return paths.tidy(os.path.join(user_dir("cache"), name))


def cache_dir() -> "Path":
    from pathlib import Path

    return Path(user_dir("cache"))


def default_db_file() -> str:
    """The database when nothing names one; its directory is created on first use."""
    directory = paths.tidy(user_dir("data"))
    os.makedirs(directory, exist_ok=True)
    return paths.tidy(os.path.join(directory, "marks.db"))


def default_db() -> "Path":
    from pathlib import Path

    return Path(default_db_file())


class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Every setting and its type: the one schema for loading the file and for `config set`."""

    db: str = ""
    output: Literal["table", "json", "csv", "urls", "plain"] = "table"
    list_limit: Annotated[int, msgspec.Meta(ge=0)] = 0
    search_limit: Annotated[int, msgspec.Meta(ge=1)] = limits.SEARCH_RESULTS
    search_fts: bool = False
    aliases: dict[str, str] = msgspec.field(default_factory=dict)
    plugins: dict[str, bool] = msgspec.field(default_factory=dict)
    # `marks serve`: where it listens and who may talk to it (see the README's security model).
    server_host: str = "127.0.0.1"
    server_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 8000
    server_names: list[str] = msgspec.field(default_factory=list)
    cors_origins: list[str] = msgspec.field(default_factory=list)
    api_token: str = ""
    server_access_log: bool = True
    # `bookmark health` and `content refresh`
    health_concurrency: Annotated[int, msgspec.Meta(ge=1)] = 20
    health_per_host: Annotated[int, msgspec.Meta(ge=1)] = 4
    health_timeout: Annotated[int, msgspec.Meta(ge=1)] = 10
    health_retries: Annotated[int, msgspec.Meta(ge=0)] = 2
    health_max_age_hours: Annotated[int, msgspec.Meta(ge=0)] = 24
    health_confirm_hours: Annotated[int, msgspec.Meta(ge=0)] = 4
    fetch_on_add: bool = True
    # `snapshot take`, and captures the extension sends
    snapshot_on_add: bool = False
    snapshot_max_mb: Annotated[float, msgspec.Meta(gt=0, le=1024)] = 20
    trash_days: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 30
    health_wayback: bool = False
    wayback_api: str = "https://archive.org/wayback/available"


HELP: dict[str, str] = {
    "db": "database file (empty: the XDG data directory's marks/marks.db)",
    "output": f"default output format ({', '.join(OUTPUTS)})",
    "list_limit": "bookmarks `bookmark list` shows by default (0: all)",
    "search_limit": "results `bookmark search` shows by default",
    "search_fts": "use ranked full-text search without --fts (true or false)",
    "aliases": "shell aliases (set them with `alias` in `marks shell`)",
    "plugins": "plugin name -> enabled (`marks plugin enable|disable NAME`)",
    "server_host": "address `marks serve` binds",
    "server_port": "port `marks serve` binds",
    "server_names": "extra Host names the server answers to (DNS-rebinding guard), comma separated",
    "cors_origins": "web origins allowed to call the API (never `*`), comma separated",
    "api_token": "token clients send as `Authorization: Token ...` (`marks config token`)",
    "server_access_log": "`marks serve` writes a line per request on stderr (combined log format)",
    "health_concurrency": "links `bookmark health` checks at once",
    "health_per_host": "links of one host checked at once",
    "health_timeout": "seconds a link (or a page) may take to answer",
    "health_retries": "retries after a timeout, 408, 429 or 5xx",
    "health_max_age_hours": "`bookmark health` skips results younger than this",
    "health_confirm_hours": "failures this far apart confirm a link is broken",
    "fetch_on_add": "`bookmark add` without --title fetches title and description",
    "snapshot_on_add": "take a snapshot of each page a bookmark is added for (true or false)",
    "snapshot_max_mb": "megabytes one snapshot may take, inlined images and fonts included",
    "trash_days": "days a deleted bookmark stays in the trash (`marks trash`) before it is gone",
    "health_wayback": "`bookmark health` looks up archived copies of confirmed-broken links",
    "wayback_api": "the Wayback Machine's availability API `--wayback` asks",
}
KEYS = Config.__struct_fields__
KEYS_BOOL = {name: type(getattr(Config(), name)) is bool for name in KEYS}
TABLES = ("aliases", "plugins")  # TOML tables: set by their own commands, written last
LISTS = ("server_names", "cors_origins")  # typed as `a, b` on the command line


def _checked(values: dict[str, Any], where: str, *, strict: bool = True) -> Config:
    try:
        return msgspec.convert(values, Config, strict=strict)
    except msgspec.ValidationError as error:
        message = str(error)
        unknown = sorted(set(values) - set(KEYS))
        if unknown:
            raise ConfigError(
                f"{where}unknown config key {unknown[0]!r} (known: {', '.join(KEYS)})"
            ) from None
        message, _, path = message.partition(" - at `$.")
        name = path.rstrip("`").split(".")[0].split("[")[0]
        hint = f" ({HELP[name]})" if name in HELP else ""
        raise ConfigError(f"{where}{name}: {message}{hint}") from None


def load(path: "Path | str | None" = None) -> dict[str, Any]:
    """The settings in effect: the file's values over the defaults, checked by `Config`."""
    path = paths.tidy(path) if path else config_file()
    if not os.path.exists(path):
        return msgspec.structs.asdict(Config())
    import tomllib  # only with a file to read (every command loads the settings)

    try:
        with open(path) as handle:  # as Path.read_text: the locale's encoding
            found = tomllib.loads(handle.read())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None
    # A key this marks does not know (written by a newer one, or by hand) is left alone, so the
    # file still loads; `config set` refuses unknown names, and keeps such keys when it rewrites.
    known = {name: value for name, value in found.items() if name in KEYS}
    return msgspec.structs.asdict(_checked(known, f"{path}: "))


def parse_value(name: str, text: str) -> Any:
    """A value typed on the command line, converted to the key's type by the same schema."""
    if name not in KEYS:
        raise ConfigError(f"unknown config key {name!r} (known: {', '.join(KEYS)})")
    if name in TABLES:
        raise ConfigError(
            f"{name} is a table: use `alias NAME=COMMAND` in the shell"
            if name == "aliases"
            else f"{name} is a table: use `marks plugin enable|disable NAME`"
        )
    if name in LISTS:
        items = [item.strip() for item in text.split(",") if item.strip()]
        return getattr(_checked({name: items}, ""), name)
    if KEYS_BOOL.get(name):  # what people type for a switch, beyond msgspec's true/false/1/0
        text = {"yes": "true", "on": "true", "no": "false", "off": "false"}.get(
            text.strip().lower(), text.strip()
        )
    return getattr(_checked({name: text}, "", strict=False), name)


def to_toml(values: dict[str, Any], *, comments: bool = False) -> str:
    """Settings as TOML text (tables last, as TOML needs), each key under its help line."""
    import tomli_w

    parts = []
    for name in [*(n for n in values if n not in TABLES), *(n for n in values if n in TABLES)]:
        text = tomli_w.dumps({name: values[name]})
        parts.append((f"# {HELP[name]}\n" if comments and name in HELP else "") + text)
    return "\n".join(parts)


def _write(path: "Path", values: dict[str, Any]) -> None:
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(to_toml(values, comments=True))
        os.replace(temporary, path)  # readers see the old file or the new one, never half
    except BaseException:
        os.unlink(temporary)
        raise


def set_value(name: str, text: str, path: "Path | None" = None) -> Any:
    return store_value(name, parse_value(name, text), path)


def _current(path: "Path") -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text()) if path.exists() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None


def store_value(name: str, value: Any, path: "Path | None" = None) -> Any:
    path = path or config_path()
    current = _current(path)
    current[name] = value
    known = {key: value for key, value in current.items() if key in KEYS}
    checked = _checked(known, f"{path}: ")  # the whole file stays loadable
    _write(path, {key: getattr(checked, key) if key in KEYS else current[key] for key in current})
    return getattr(checked, name)


def init(path: "Path | None" = None, force: bool = False) -> "Path":
    path = path or config_path()
    if path.exists() and not force:
        raise ConfigError(f"{path} exists already (--force replaces it)")
    _write(path, msgspec.structs.asdict(Config()))
    return path
