"""The web UI's page names every ES module the first list needs (`<link rel="modulepreload">`),
so the browser fetches them at once instead of one level of imports after another, and nothing
else: the sidebar's views are imported after the first list, and asked for with the page they
queued the list's request behind them (a browser opens 6 connections to a server)."""

import re
from pathlib import Path

import marks.server

STATIC = Path(marks.server.__file__).with_name("static")


def _static_imports(module: str) -> set[str]:
    """The modules `module` imports at its top, and theirs (paths under static/)."""
    found: set[str] = set()
    pending = [module]
    while pending:
        path = STATIC / pending.pop()
        for target in re.findall(r'^import [^;]*? from "([^"]+)";', path.read_text(), re.M):
            name = (path.parent / target).resolve().relative_to(STATIC.resolve()).as_posix()
            if name not in found:
                found.add(name)
                pending.append(name)
    return found


def test_index_preloads_exactly_the_modules_the_first_list_needs():
    page = (STATIC / "index.html").read_text()
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/static/([^"]+)">', page))
    entry = set(re.findall(r'<script type="module" src="/static/([^"]+)">', page))
    assert entry == {"js/app.js"}
    assert preloaded == _static_imports("js/app.js")
    assert preloaded >= {"js/api.js", "js/dom.js"}  # the scan above finds imports at all
    assert not any(name.startswith("views/") for name in preloaded)
