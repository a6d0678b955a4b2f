"""Plugins: discovered through the `marks.plugins` entry-point group, called from the service layer.

A plugin is an object (or a class made with no arguments) that an entry point names. It declares
`name`, `version`, `type` (one of TYPES), `priority`, `description`, `author` and `dependencies`;
what it leaves out comes from its distribution's metadata. Built-in plugins are registered through
the same entry-point group in marks' own `pyproject.toml`, so nothing about them is special.

Every hook and type method is called in priority order (the lower number first, like the reading
queue). A plugin that raises is reported once, through the `report` callable the front end gives,
and disabled for the rest of the command; the user's change has been committed before any
lifecycle hook runs, so a failing plugin can never lose it.

Which plugins are enabled lives in the config file (`plugins = { name = false }`): installed
plugins are enabled until the user disables one, as with pytest's or datasette's plugins.
"""

import contextlib
import importlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from marks.exceptions import MarksError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint, PackageMetadata

GROUP = "marks.plugins"
TYPES = {
    "tag_suggester": "suggests tags for a bookmark: suggest(bookmark, text) -> [(tag, score)]",
    "content_extractor": "turns a fetched page into text: extract(url, content_type, body)",
    "similarity_finder": "finds related bookmarks: similar(bookmark, limit) -> [(id, score)]",
    "search_enhancer": "rewrites a search before it runs: enhance(query) -> query",
    "bookmark_enricher": "fills in a new bookmark: enrich(bookmark) -> {field: value}",
}
TYPE_METHODS = {
    "tag_suggester": "suggest",
    "content_extractor": "extract",
    "similarity_finder": "similar",
    "search_enhancer": "enhance",
    "bookmark_enricher": "enrich",
}
HOOKS = ("on_load", "on_bookmark_added", "on_bookmark_updated", "on_bookmark_deleted", "on_unload")
DEFAULT_PRIORITY = 50


class PluginError(MarksError):
    pass


class PluginInfo(msgspec.Struct, kw_only=True):
    """What `plugin list` and `plugin info` show."""

    name: str
    type: str
    version: str = ""
    priority: int = DEFAULT_PRIORITY
    enabled: bool = True
    description: str = ""
    author: str = ""
    dependencies: list[str] = []
    missing: list[str] = []  # dependencies that are not installed
    builtin: bool = False
    entry_point: str = ""
    problem: str | None = None  # why it cannot run (failed import, unknown type, ...)


class Extracted(msgspec.Struct, kw_only=True):
    """What a content_extractor returns for a page it understands."""

    text: str
    title: str = ""
    description: str = ""


class Context(msgspec.Struct, kw_only=True):
    """Handed to `on_load`: the service a plugin may read from (never a front end)."""

    library: Any
    config: dict[str, Any] = {}


# Compiled on first use (by `re`, which keeps it): only discovery reads requirements, and
# compiling it cost every command about 0.3 million instructions.
_REQUIREMENT_NAME = r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)"


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503: how distribution names compare


def _installed(requirement: str, installed: set[str]) -> bool:
    match = re.match(_REQUIREMENT_NAME, requirement)
    return match is not None and _normalised(match.group(1)) in installed


class _Found(msgspec.Struct, array_like=True):
    """One entry point of the group with what its distribution says, as the index keeps it."""

    name: str
    value: str
    version: str = ""
    author: str = ""
    summary: str = ""
    requires: list[str] | None = None


class _Index(msgspec.Struct):
    """What discovery found, and the state of the import path it was found in: reading every
    installed distribution's metadata (`importlib.metadata`, which imports the email parser)
    took tens of ms of every command that calls a plugin, `bookmark search` among them."""

    stamp: list[tuple[str, int]]
    found: list[_Found]
    installed: list[str]


def _stamp() -> list[tuple[str, int]]:
    """Each directory of the import path with its modification time: installing, upgrading or
    removing a distribution adds or removes its `.dist-info` directory there, which changes it."""
    stamp = []
    for entry in sys.path:
        with contextlib.suppress(OSError):
            stamp.append((entry, os.stat(entry or ".").st_mtime_ns))
    return stamp


def _found(point: "EntryPoint") -> _Found:
    dist = point.dist
    meta = dist.metadata if dist is not None else None
    return _Found(
        point.name,
        point.value,
        dist.version if dist is not None else "",
        (_field(meta, "Author") or _field(meta, "Author-email")) if meta else "",
        _field(meta, "Summary") if meta else "",
        list(dist.requires) if dist is not None and dist.requires is not None else None,
    )


def _installed_names() -> set[str]:
    import importlib.metadata

    return {_normalised(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}


def _scan() -> tuple[list[_Found], set[str]]:
    import importlib.metadata

    return [_found(p) for p in importlib.metadata.entry_points(group=GROUP)], _installed_names()


def _discovered(index_path: "str | os.PathLike[str] | None") -> tuple[list[_Found], set[str]]:
    """The group's entry points: from the index when the import path is as it was, else read
    from the installed distributions (and the index written again, atomically)."""
    stamp = _stamp()
    if index_path is not None:
        with contextlib.suppress(OSError, msgspec.ValidationError, msgspec.DecodeError):
            with open(index_path, "rb") as handle:
                index = msgspec.json.decode(handle.read(), type=_Index)
            if [tuple(item) for item in index.stamp] == stamp:
                return index.found, set(index.installed)
    found, installed = _scan()
    if index_path is not None:
        with contextlib.suppress(OSError):  # an unwritable cache only costs the next command
            os.makedirs(os.path.dirname(os.fspath(index_path)) or ".", exist_ok=True)
            partial = f"{os.fspath(index_path)}.{os.getpid()}"
            with open(partial, "wb") as handle:
                handle.write(msgspec.json.encode(_Index(stamp, found, sorted(installed))))
            os.replace(partial, index_path)
    return found, installed


# Whether a plugin's code was imported in this process: `marks.program` then leaves by the
# interpreter's ordinary exit, which finalizes what third-party code may have left open (a file
# written and not closed loses its buffer to a bare `os._exit`).
foreign_code_loaded = False


def _load(value: str) -> Any:
    """What an entry point's `module:attribute.path [extras]` names (as EntryPoint.load)."""
    global foreign_code_loaded
    foreign_code_loaded = True
    module, _, attribute = value.partition(":")
    target = importlib.import_module(module.strip())
    for part in attribute.split("[", 1)[0].strip().split("."):
        if part:
            target = getattr(target, part)
    return target


class _Loaded:
    __slots__ = ("info", "plugin")

    def __init__(self, info: PluginInfo, plugin: Any) -> None:
        self.info = info
        self.plugin = plugin


class Plugins:
    """The plugins of one command: discovered lazily, the first time something asks for them."""

    def __init__(
        self,
        enabled: dict[str, bool] | None = None,
        report: Callable[[str], None] = lambda message: None,
        entry_points: Iterable["EntryPoint"] | None = None,
        index_path: "str | os.PathLike[str] | None" = None,
    ) -> None:
        self._enabled = dict(enabled or {})
        self._report = report
        self._entry_points = entry_points
        self._index_path = index_path  # where discovery's findings are kept between commands
        self._infos: list[PluginInfo] | None = None
        self._loaded: list[_Loaded] | None = None
        self._context: Context | None = None

    # --- discovery -------------------------------------------------------------------------------

    def _points(self) -> tuple[list[tuple[_Found, Callable[[], Any]]], set[str]]:
        """Each entry point with how to load it, and the installed distributions' names."""
        if self._entry_points is not None:  # handed in (tests): read as importlib gives them
            points = list(self._entry_points)
            return [(_found(point), point.load) for point in points], _installed_names()
        found, installed = _discovered(self._index_path)
        return [(item, partial(_load, item.value)) for item in found], installed

    def _describe(
        self, point: _Found, load: Callable[[], Any], installed: set[str]
    ) -> tuple[PluginInfo, Any]:
        info = PluginInfo(
            name=point.name,
            type="",
            version=point.version,
            author=point.author,
            description=point.summary,
            builtin=point.value.startswith("marks."),
            entry_point=point.value,
        )
        try:
            target = load()
            plugin = target() if isinstance(target, type) else target
        except Exception as error:  # a broken plugin is listed with its problem, never fatal
            info.problem = f"cannot load {point.value}: {type(error).__name__}: {error}"
            info.enabled = False
            return info, None
        info.name = str(getattr(plugin, "name", None) or point.name)
        info.type = str(getattr(plugin, "type", ""))
        info.version = str(getattr(plugin, "version", None) or info.version)
        info.description = str(getattr(plugin, "description", None) or info.description)
        info.author = str(getattr(plugin, "author", None) or info.author)
        info.priority = _priority(getattr(plugin, "priority", DEFAULT_PRIORITY))
        declared = getattr(plugin, "dependencies", None)
        if declared is None and point.requires is not None:
            declared = [r for r in point.requires if "extra ==" not in r]
        info.dependencies = [str(item) for item in declared or []]
        info.missing = [item for item in info.dependencies if not _installed(item, installed)]
        info.enabled = self._enabled.get(info.name, True)
        if info.type not in TYPES:
            info.problem = f"unknown plugin type {info.type!r} (known: {', '.join(TYPES)})"
        elif not callable(getattr(plugin, TYPE_METHODS[info.type], None)):
            info.problem = f"a {info.type} must have a {TYPE_METHODS[info.type]}() method"
        elif info.missing:
            info.problem = f"missing dependencies: {', '.join(info.missing)}"
        return info, plugin

    def _discover(self) -> None:
        if self._infos is not None:
            return
        found: list[tuple[PluginInfo, Any]] = []
        names: set[str] = set()
        points, installed = self._points()
        for point, load in points:
            info, plugin = self._describe(point, load, installed)
            if info.name in names:
                info.problem = f"another plugin is already called {info.name!r}"
            names.add(info.name)
            found.append((info, plugin))
        found.sort(key=lambda pair: (pair[0].priority, pair[0].name))
        self._infos = [info for info, _ in found]
        self._loaded = [
            _Loaded(info, plugin)
            for info, plugin in found
            if plugin is not None and info.enabled and info.problem is None
        ]

    def infos(self) -> list[PluginInfo]:
        """Every installed plugin, enabled or not, in priority order."""
        self._discover()
        assert self._infos is not None
        return list(self._infos)

    def info(self, name: str) -> PluginInfo:
        for info in self.infos():
            if info.name == name:
                return info
        known = ", ".join(info.name for info in self.infos()) or "none installed"
        raise PluginError(f"no plugin called {name!r} (known: {known})")

    # --- calling ---------------------------------------------------------------------------------

    def start(self, context: Context) -> None:
        """Remember the context; `on_load` runs when a plugin is first used."""
        self._context = context

    def load(self) -> None:
        """Discover and run `on_load` now: a server does it once at start, before its worker
        threads share this object (lazy discovery is for short commands)."""
        self._active()

    def _active(self) -> list[_Loaded]:
        if self._loaded is None:
            self._discover()
            assert self._loaded is not None
            if self._context is not None:
                for loaded in list(self._loaded):
                    self._call(loaded, "on_load", self._context)
        return self._loaded

    def apply(self, kind: str, *args: Any) -> Iterator[tuple[str, Any]]:
        """Call every plugin of a type; a failing one is reported, disabled, and skipped."""
        for loaded in list(self._active()):
            if loaded.info.type != kind:
                continue
            ok, result = self._call(loaded, TYPE_METHODS[kind], *args)
            if ok:
                yield loaded.info.name, result

    def chain(self, kind: str, value: Any) -> Any:
        """Thread a value through every plugin of a type (search_enhancer rewrites a query).

        An answer of another type than the value's is ignored, as if that plugin had no say.
        """
        for loaded in list(self._active()):
            if loaded.info.type != kind:
                continue
            ok, result = self._call(loaded, TYPE_METHODS[kind], value)
            if ok and isinstance(result, type(value)):
                value = result
        return value

    def fire(self, hook: str, *args: Any) -> None:
        """A lifecycle hook, for every enabled plugin that has it."""
        for loaded in list(self._active()):
            self._call(loaded, hook, *args)

    def close(self) -> None:
        if self._loaded is not None:
            for loaded in list(self._loaded):
                self._call(loaded, "on_unload")

    def _call(self, loaded: _Loaded, method: str, *args: Any) -> tuple[bool, Any]:
        function = getattr(loaded.plugin, method, None)
        if function is None:
            return False, None
        try:
            return True, function(*args)
        except Exception as error:
            self._disable(loaded, f"plugin {loaded.info.name} failed in {method}: {error!r}")
            return False, None

    def _disable(self, loaded: _Loaded, message: str) -> None:
        if self._loaded is not None and loaded in self._loaded:
            self._loaded.remove(loaded)
            self._report(f"{message}; disabled for the rest of this command")


def _priority(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return DEFAULT_PRIORITY


def _field(meta: "PackageMetadata", name: str) -> str:
    """A metadata field's first value, "" when absent (`get` is not in Python 3.11's protocol)."""
    values = meta.get_all(name)
    return str(values[0] or "") if values else ""
