"""Where marks keeps things (XDG) and the TOML config: known keys, checked types, atomic writes."""

import os
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUTPUTS = ("table", "json", "csv", "urls", "plain")


class ConfigError(ValueError):
    pass


def _xdg(variable: str, fallback: str) -> Path:
    return Path(os.environ.get(variable) or os.path.expanduser(fallback))


def config_path() -> Path:
    return _xdg("XDG_CONFIG_HOME", "~/.config") / "marks" / "config.toml"


def data_dir() -> Path:
    return _xdg("XDG_DATA_HOME", "~/.local/share") / "marks"


def state_dir() -> Path:
    return _xdg("XDG_STATE_HOME", "~/.local/state") / "marks"


@dataclass(frozen=True)
class Key:
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()


KEYS: dict[str, Key] = {
    "db": Key(str, "", "database file (empty: $XDG_DATA_HOME/marks/marks.db)"),
    "output": Key(str, "table", "default output format", OUTPUTS),
    "list_limit": Key(int, 0, "bookmarks `bookmark list` shows by default (0: all)"),
    "search_limit": Key(int, 50, "results `bookmark search` shows by default"),
    "search_fts": Key(bool, False, "use ranked full-text search without --fts"),
    "aliases": Key(dict, {}, "shell aliases (set them with `alias` in `marks shell`)"),
    # `marks serve`: where it listens and who may talk to it (see the README's security model).
    "server_host": Key(str, "127.0.0.1", "address `marks serve` binds"),
    "server_port": Key(int, 8000, "port `marks serve` binds"),
    "server_names": Key(list, [], "extra Host names the server answers to (DNS-rebinding guard)"),
    "cors_origins": Key(list, [], "web origins allowed to call the API (never `*`)"),
    "api_token": Key(str, "", "token clients send as `Authorization: Token ...`"),
    "plugins": Key(dict, {}, "plugin name -> enabled (`marks plugin enable|disable NAME`)"),
    "health_concurrency": Key(int, 20, "links `bookmark health` checks at once"),
    "health_per_host": Key(int, 4, "links of one host checked at once"),
    "health_timeout": Key(int, 10, "seconds a link (or a page) may take to answer"),
    "health_retries": Key(int, 2, "retries after a timeout, 408, 429 or 5xx"),
    "health_max_age_hours": Key(int, 24, "`bookmark health` skips results younger than this"),
    "health_confirm_hours": Key(int, 4, "failures this far apart confirm a link is broken"),
    "fetch_on_add": Key(bool, True, "`bookmark add` without --title fetches title and description"),
}


def _check(name: str, value: Any) -> Any:
    key = KEYS.get(name)
    if key is None:
        raise ConfigError(f"unknown config key {name!r} (known: {', '.join(KEYS)})")
    if (
        (key.kind is bool and not isinstance(value, bool))
        or (key.kind is int and (isinstance(value, bool) or not isinstance(value, int)))
        or (key.kind is str and not isinstance(value, str))
        or (
            key.kind is list
            and not (isinstance(value, list) and all(isinstance(i, str) for i in value))
        )
    ):
        raise ConfigError(f"{name} must be {key.kind.__name__}, not {value!r}")
    if key.choices and value not in key.choices:
        raise ConfigError(f"{name} must be one of {', '.join(key.choices)}, not {value!r}")
    if key.kind is int and value < 0:
        raise ConfigError(f"{name} must not be negative")
    return value


def parse_value(name: str, text: str) -> Any:
    """A value typed on the command line, converted to the key's type."""
    key = KEYS.get(name)
    if key is None:
        _check(name, None)
    assert key is not None
    if key.kind is dict:
        raise ConfigError(f"{name} is a table: edit it in the shell (alias NAME=COMMAND)")
    if key.kind is list:  # `a, b` on the command line
        return _check(name, [item.strip() for item in text.split(",") if item.strip()])
    if key.kind is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            raise ConfigError(f"{name} must be true or false, not {text!r}")
        return _check(name, lowered in ("true", "yes", "1", "on"))
    if key.kind is int:
        try:
            return _check(name, int(text))
        except ValueError:
            raise ConfigError(f"{name} must be a whole number, not {text!r}") from None
    return _check(name, text)


def load(path: Path | None = None) -> dict[str, Any]:
    path = path or config_path()
    values = {name: key.default for name, key in KEYS.items()}
    if not path.exists():
        return values
    try:
        found = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None
    for name, value in found.items():
        values[name] = _check(name, value)
    return values


def _write(path: Path, values: dict[str, Any]) -> None:
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            tomli_w.dump(values, handle)
        os.replace(temporary, path)  # readers see the old file or the new one, never half
    except BaseException:
        os.unlink(temporary)
        raise


def set_value(name: str, text: str, path: Path | None = None) -> Any:
    return store_value(name, parse_value(name, text), path)


def store_value(name: str, value: Any, path: Path | None = None) -> Any:
    path = path or config_path()
    value = _check(name, value)
    current = tomllib.loads(path.read_text()) if path.exists() else {}
    current[name] = value
    _write(path, current)
    return value


def init(path: Path | None = None, force: bool = False) -> Path:
    path = path or config_path()
    if path.exists() and not force:
        raise ConfigError(f"{path} exists already (--force replaces it)")
    _write(path, {name: key.default for name, key in KEYS.items()})
    return path
