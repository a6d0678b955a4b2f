"""Plugins: a real plugin package installed with pip, listed, called in order, isolated on failure.

The package (tests/marks/plugin_example) is installed into a temporary directory that the `marks`
processes get on PYTHONPATH, so the test venv itself is never changed.
"""

import json
import os
import shutil
import subprocess

import pytest

from marks.autotag import suggest
from marks.keywords import KeywordSuggester
from marks.library import Library
from marks.plugins import Context, Plugins
from support.marksrun import MARKS


@pytest.fixture
def run(plugin_site, tmp_path):
    journal = tmp_path / "journal.txt"
    journal.touch()
    env = {
        **os.environ,
        "PYTHONPATH": str(plugin_site),
        "MARKS_EXAMPLE_JOURNAL": str(journal),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop("MARKS_DB", None)

    def marks(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [MARKS, "--db", str(tmp_path / "lib.db"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    marks.journal = journal  # type: ignore[attr-defined]
    return marks


def test_installed_plugins_are_listed_with_their_metadata(run):
    listed = run("plugin", "list", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    plugins = {p["name"]: p for p in json.loads(listed.stdout)}
    assert {"keywords", "stamp", "zz-early", "aa-late", "grumpy", "needy"} <= set(plugins)
    assert plugins["keywords"]["builtin"] is True
    early = plugins["zz-early"]
    assert (early["type"], early["version"], early["priority"]) == ("tag_suggester", "9.9", 10)
    stamp = plugins["stamp"]
    assert stamp["version"] == "1.2.3"  # from the distribution when the plugin does not say
    assert stamp["author"] == "Test Author"
    assert plugins["needy"]["missing"] == ["surely-not-installed-package>=1"]
    assert "missing dependencies" in plugins["needy"]["problem"]

    table = run("plugin", "list").stdout
    assert "bookmark_enricher:" in table and "tag_suggester:" in table
    assert "broken" in table  # needy cannot run

    info = run("plugin", "info", "stamp")
    assert info.returncode == 0
    assert "bookmark_enricher" in info.stdout and "Test Author" in info.stdout
    missing = run("plugin", "info", "nope")
    assert missing.returncode == 1 and missing.stderr.startswith("marks: no plugin called")

    types = run("plugin", "types", "--output", "json")
    kinds = {row["type"]: row["installed"] for row in json.loads(types.stdout)}
    assert set(kinds) == {
        "tag_suggester",
        "content_extractor",
        "similarity_finder",
        "search_enhancer",
        "bookmark_enricher",
    }
    assert kinds["bookmark_enricher"] == 1


def test_hooks_run_in_priority_order_and_a_failing_plugin_is_isolated(run):
    added = run("bookmark", "add", "https://example.org/page", "--output", "json")
    assert added.returncode == 0, added.stderr
    bookmark = json.loads(added.stdout)[0]
    # The enricher filled the empty title and added its tag, before the bookmark was stored.
    assert bookmark["title"] == "Stamped title"
    assert bookmark["tags"] == ["stamped"]
    # grumpy raised: reported once on stderr, the command still succeeded.
    assert added.stderr.count("plugin grumpy failed in on_bookmark_added") == 1
    assert "disabled for the rest of this command" in added.stderr

    lines = run.journal.read_text().splitlines()
    assert lines == [
        "early on_load",  # every plugin is loaded when the first one is needed
        "late on_load",
        "stamp enrich https://example.org/page",
        f"early added {bookmark['id']} Stamped title",
        f"late added {bookmark['id']} Stamped title",
        "early on_unload",
        "late on_unload",
    ]

    # The change survived the failing plugin: it is in the database.
    listed = json.loads(run("bookmark", "list", "--output", "json").stdout)
    assert [b["url"] for b in listed] == ["https://example.org/page"]


def test_a_plugin_failing_on_every_item_is_reported_once(run):
    for n in (1, 2, 3):
        assert (
            run("bookmark", "add", f"https://example.org/{n}", "--title", f"t{n}").returncode == 0
        )
    run.journal.write_text("")
    deleted = run("bookmark", "delete", "1", "2", "3", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stderr.count("plugin grumpy failed") == 1
    journal = run.journal.read_text().splitlines()
    assert [line for line in journal if "deleted" in line] == [
        "early deleted 1",
        "late deleted 1",
        "early deleted 2",
        "late deleted 2",
        "early deleted 3",
        "late deleted 3",
    ]
    assert json.loads(run("bookmark", "list", "--output", "json").stdout) == []


def test_disabled_plugins_do_not_run_and_the_state_is_in_the_config(run, tmp_path):
    assert run("plugin", "disable", "stamp").returncode == 0
    assert run("plugin", "disable", "grumpy").returncode == 0
    config = (tmp_path / "config" / "marks" / "config.toml").read_text()
    assert "stamp = false" in config and "grumpy = false" in config

    added = run("bookmark", "add", "https://example.org/plain", "--title", "Mine")
    assert added.returncode == 0 and "grumpy" not in added.stderr
    assert "stamp enrich" not in run.journal.read_text()
    (shown,) = json.loads(run("bookmark", "list", "--output", "json").stdout)
    assert shown["tags"] == [] and shown["title"] == "Mine"

    statuses = {
        p["name"]: p["enabled"] for p in json.loads(run("plugin", "list", "-o", "json").stdout)
    }
    assert statuses["stamp"] is False and statuses["zz-early"] is True
    assert run("plugin", "enable", "stamp").returncode == 0
    assert run("plugin", "disable", "no-such-plugin").returncode == 1


def test_auto_tag_asks_every_suggester_and_survives_a_failing_one(run):
    assert run("bookmark", "add", "https://example.org/a", "--title", "A").returncode == 0
    suggested = run("content", "auto-tag", "1", "--output", "json")
    assert suggested.returncode == 0, suggested.stderr
    tags = {s["tag"]: s["by"] for s in json.loads(suggested.stdout)}
    assert tags["from-early"] == ["zz-early"] and tags["from-late"] == ["aa-late"]
    assert suggested.stderr.count("plugin grumpy failed in suggest") == 1

    applied = run("content", "auto-tag", "1", "--apply")
    assert applied.returncode == 0
    (shown,) = json.loads(run("bookmark", "list", "-o", "json").stdout)
    assert {"from-early", "from-late", "stamped"} <= set(shown["tags"])


def test_the_keyword_suggester_learns_from_the_library(library: Library):
    library.add("https://docs.python.org/3/tutorial", title="Python tutorial", tags=["python"])
    library.add("https://realpython.com/async", title="Async Python guide", tags=["python/async"])
    library.add("https://www.rust-lang.org/learn", title="Learn Rust programming", tags=["rust"])
    library.add("https://doc.rust-lang.org/book", title="The Rust book: ownership", tags=["rust"])
    target = library.add("https://example.com/x", title="Ownership and borrowing in Rust")
    nested = library.get(2)

    plugins = Plugins(entry_points=[])  # only the one handed in below
    suggester = KeywordSuggester()
    suggester.on_load(Context(library=library))
    offered = dict(suggester.suggest(target, ""))
    assert offered["rust"] >= 0.9  # a tag the library knows, near the strongest (rarest) word
    assert "ownership" in offered and "and" not in offered
    # A bookmark is never offered a tag it has, or an ancestor of one it has.
    assert "python" not in dict(suggester.suggest(nested, ""))
    assert plugins.infos() == []


def test_suggestions_merge_suggesters_and_respect_min_score(library: Library):
    target = library.add("https://example.com/", title="x")

    class Fixed:
        type = "tag_suggester"

        def __init__(self, name, pairs):
            self.name, self.pairs = name, pairs

        def suggest(self, bookmark, text):
            return self.pairs

    class Point:
        def __init__(self, name, plugin):
            self.name, self.value, self.dist, self._plugin = name, f"tests:{name}", None, plugin

        def load(self):
            return self._plugin

    plugins = Plugins(
        entry_points=[
            Point("one", Fixed("one", [("alpha", 0.9), ("beta", 0.2), ("", 1.0)])),
            Point("two", Fixed("two", [("Alpha", 0.5), ("gamma", 0.4), "junk"])),
        ]
    )
    found = suggest(library, plugins, [target.id], min_score=0.3)
    assert [(s.tag, s.score, s.by) for s in found] == [
        ("alpha", 0.9, ["one", "two"]),
        ("gamma", 0.4, ["two"]),
    ]


class _Point:
    """An entry point as importlib.metadata gives it, for plugins defined in this file."""

    def __init__(self, name, plugin):
        self.name, self.value, self.dist, self._plugin = name, f"tests:{name}", None, plugin

    def load(self):
        return self._plugin


def test_search_enhancers_rewrite_the_query_in_priority_order(db_path):
    from marks.store import Store

    class Synonyms:
        type, priority = "search_enhancer", 1

        def enhance(self, query):
            return query.replace("py", "python")

        def on_bookmark_added(self, bookmark):
            pass

    class Broken:
        type, priority = "search_enhancer", 2

        def enhance(self, query):
            return 42  # not a query: ignored

    reported: list[str] = []
    plugins = Plugins(
        entry_points=[_Point("later", Broken()), _Point("synonyms", Synonyms())],
        report=reported.append,
    )
    store = Store(db_path)
    library = Library(store, plugins=plugins)
    library.add("https://example.com/", title="python tricks")
    assert [hit.bookmark.title for hit in library.search("py")] == ["python tricks"]
    assert reported == []
    store.close()


def test_content_extractor_plugins_take_part_in_refresh(db_path):
    from marks.content import Content
    from marks.plugins import Extracted
    from marks.store import Store
    from support.websites import Websites

    class Upper:
        type, priority = "content_extractor", 1

        def extract(self, url, content_type, body):
            if "special" not in url:
                return None  # not mine: the next extractor (or the built-in one) reads it
            return Extracted(text=body.decode().upper()[:40], title="From the plugin")

    class Broken:
        type, priority = "content_extractor", 0

        def extract(self, url, content_type, body):
            raise RuntimeError("cannot read pages")

    reported: list[str] = []
    plugins = Plugins(
        entry_points=[_Point("broken", Broken()), _Point("upper", Upper())], report=reported.append
    )
    store = Store(db_path)
    library = Library(store, plugins=plugins)
    with Websites(hosts=1) as web:
        web.pages["special"] = ("Special", "words on the special page")
        special = library.add(web.url("/page/special"))
        plain = library.add(web.url("/page/plain"))
        refresher = Content(library)
        refresher.plan([special.id, plain.id])
        refresher.refresh()
    pages = Content(library)
    assert pages.text(special.id).startswith("<!DOCTYPE HTML><HTML>")  # the plugin's reading
    assert library.get(special.id).title == "From the plugin"
    assert "Body of plain" in pages.text(plain.id)  # the built-in extractor for the rest
    assert len(reported) == 1 and "plugin broken failed in extract" in reported[0]
    store.close()


def test_what_discovery_found_is_kept_and_follows_installs_and_removals(plugin_site, tmp_path):
    """Discovery reads every installed distribution's metadata; a command keeps what it found
    (an index in the cache directory) for the next, which reads it only while the import path
    is unchanged: a distribution removed (or added) is seen by the next command."""
    site = tmp_path / "site"
    shutil.copytree(plugin_site, site)
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))

    def names() -> set[str]:
        listed = subprocess.run(
            [MARKS, "--db", str(tmp_path / "lib.db"), "plugin", "list", "--output", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        return {plugin["name"] for plugin in json.loads(listed.stdout)}

    first = names()
    assert {"keywords", "stamp", "needy"} <= first
    index = tmp_path / "cache" / "marks" / "plugins.json"
    assert "stamp" in index.read_text()
    assert names() == first  # from the index
    for installed in site.glob("*.dist-info"):  # as `pip uninstall` does
        shutil.rmtree(installed)
    assert names() == {"keywords"}
    index.write_text("{not json")  # a damaged index is read again from what is installed
    assert names() == {"keywords"}
