"""The web UI's page names every ES module it loads up front (`<link rel="modulepreload">`),
so the browser fetches them at once instead of one level of imports after another."""

import re
from pathlib import Path

import marks.server

STATIC = Path(marks.server.__file__).with_name("static")


def test_index_preloads_every_module_of_the_web_ui():
    page = (STATIC / "index.html").read_text()
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/static/([^"]+)">', page))
    entry = set(re.findall(r'<script type="module" src="/static/([^"]+)">', page))
    modules = {path.relative_to(STATIC).as_posix() for path in STATIC.rglob("*.js")}
    assert entry == {"js/app.js"}
    assert preloaded == modules - entry  # a new view module is added to index.html too
