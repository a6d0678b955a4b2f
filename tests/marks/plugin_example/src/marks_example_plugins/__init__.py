"""Plugins that show what marks calls, in which order, and what happens when one fails.

The journals append one line per hook call to the file named by MARKS_EXAMPLE_JOURNAL.
"""

import os


def _note(line: str) -> None:
    with open(os.environ["MARKS_EXAMPLE_JOURNAL"], "a") as journal:
        journal.write(line + "\n")


class Stamp:
    """A bookmark_enricher: fills an empty title and adds a tag."""

    type = "bookmark_enricher"
    priority = 20
    description = "Titles untitled bookmarks"

    def enrich(self, bookmark):
        _note(f"stamp enrich {bookmark.url}")
        return {"title": "Stamped title", "tags": ["stamped"]}


class _Journal:
    type = "tag_suggester"
    label = ""

    def on_load(self, context):
        _note(f"{self.label} on_load")

    def on_bookmark_added(self, bookmark):
        _note(f"{self.label} added {bookmark.id} {bookmark.title}")

    def on_bookmark_updated(self, bookmark):
        _note(f"{self.label} updated {bookmark.id}")

    def on_bookmark_deleted(self, bookmark):
        _note(f"{self.label} deleted {bookmark.id}")

    def on_unload(self):
        _note(f"{self.label} on_unload")

    def suggest(self, bookmark, text):
        return [("from-" + self.label, 0.9)]


class EarlyJournal(_Journal):
    name = "zz-early"  # sorts last by name, runs first by priority
    label = "early"
    priority = 10
    version = "9.9"


class LateJournal(_Journal):
    name = "aa-late"
    label = "late"
    priority = 90


class Grumpy:
    """Fails in every hook: marks must report it once and carry on."""

    type = "tag_suggester"
    priority = 50
    dependencies = ()

    def on_bookmark_added(self, bookmark):
        raise RuntimeError("grumpy refuses")

    def on_bookmark_deleted(self, bookmark):
        raise RuntimeError("grumpy refuses to let go")

    def suggest(self, bookmark, text):
        raise ValueError("no suggestions from grumpy")


class Needy:
    """Declares a dependency that is not installed: listed, never run."""

    type = "search_enhancer"
    dependencies = ("surely-not-installed-package>=1",)

    def enhance(self, query):
        return query
