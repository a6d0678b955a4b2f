"""`/plugins`: the installed plugins, as `marks plugin list -o json` shows them."""

from marks.library import Library
from marks.plugins import PluginInfo
from marks.server.endpoint import Call, Endpoint


def list_plugins(library: Library, call: Call) -> list[PluginInfo]:
    infos = call.server.plugins.infos()
    return sorted(infos, key=lambda info: (info.type, info.priority, info.name))


ENDPOINTS = [
    Endpoint("GET", "/plugins", "Installed plugins by type, in the order they run, with status",
             list_plugins, response=list[PluginInfo]),
]  # fmt: skip
