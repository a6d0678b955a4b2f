"""Property tests: whatever tree of folders and bookmarks a browser holds, the readers give back
every bookmark with its folder path as a tag; profile files and clocks round-trip."""

import datetime as dt
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from marks import tagnames
from marks.browsers import chromium, firefox, profiles, safari, times
from support.browserfiles import (
    MENU,
    Places,
    chromium_folder,
    chromium_url,
    safari_folder,
    safari_leaf,
    write_chromium_bookmarks,
    write_profiles_ini,
    write_safari_bookmarks,
)

NAMES = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=0, max_size=12)
URLS = st.builds(
    lambda host, path: f"https://{host}.example/{path}",
    st.text(alphabet="abcdefghijklmnop", min_size=1, max_size=8),
    st.text(alphabet="abc/-_~%20", max_size=10),
)
MOMENTS = st.datetimes(
    min_value=dt.datetime(1990, 1, 1), max_value=dt.datetime(2090, 1, 1), timezones=st.just(dt.UTC)
).map(lambda moment: moment.replace(microsecond=0))

# A tree: ("url", title, url, added) or ("folder", name, [children]).
LEAF = st.tuples(st.just("url"), NAMES, URLS, MOMENTS)
TREE = st.recursive(
    LEAF,
    lambda inner: st.tuples(st.just("folder"), NAMES, st.lists(inner, max_size=4)),
    max_leaves=25,
)
FOREST = st.lists(TREE, max_size=6)


def expected(forest, path="") -> list[tuple[str, str, str, dt.datetime]]:
    found = []
    for node in forest:
        if node[0] == "url":
            found.append((node[2], node[1], path, node[3]))
        else:
            name = tagnames.from_folder(node[1])
            inner = f"{path}/{name}" if path and name else path or name
            found.extend(expected(node[2], inner))
    return found


def as_tuples(records) -> list[tuple[str, str, str, dt.datetime | None]]:
    return [(r.url, r.title, r.tags[0] if r.tags else "", r.added) for r in records]


@settings(max_examples=60, deadline=None)
@given(FOREST, FOREST)
def test_chromium_reader_round_trip(bar, other):
    def to_json(node):
        if node[0] == "url":
            return chromium_url(node[1], node[2], node[3])
        return chromium_folder(node[1], [to_json(child) for child in node[2]])

    directory = Path(tempfile.mkdtemp())
    try:
        write_chromium_bookmarks(directory, [to_json(n) for n in bar], [to_json(n) for n in other])
        with chromium.Reader(directory) as reader:
            assert as_tuples(reader.bookmarks()) == expected(bar) + expected(other)
            assert reader.count() == len(expected(bar) + expected(other))
    finally:
        shutil.rmtree(directory)


@settings(max_examples=60, deadline=None)
@given(FOREST)
def test_safari_reader_round_trip(forest):
    def to_plist(node):
        if node[0] == "url":
            return safari_leaf(node[2], node[1])
        return safari_folder(node[1], [to_plist(child) for child in node[2]])

    directory = Path(tempfile.mkdtemp())
    try:
        write_safari_bookmarks(
            directory, [safari_folder("BookmarksMenu", [to_plist(n) for n in forest])]
        )
        with safari.Reader(directory) as reader:
            got = [(url, title, tag) for url, title, tag, _ in as_tuples(reader.bookmarks())]
            assert got == [(url, title, tag) for url, title, tag, _ in expected(forest)]
    finally:
        shutil.rmtree(directory)


@settings(max_examples=40, deadline=None)
@given(FOREST)
def test_firefox_reader_round_trip(forest):
    directory = Path(tempfile.mkdtemp())
    try:
        places = Places(directory / "places.sqlite")
        places.db.execute("BEGIN")
        page_titles: dict[str, str] = {}

        def write(nodes, parent):
            for node in nodes:
                if node[0] == "url":
                    # One moz_places row per URL, as Firefox keeps it, titled by the first.
                    places.bookmark(node[2], node[1], parent, node[3])
                    page_titles.setdefault(node[2], node[1])
                else:
                    write(node[2], places.folder(node[1], parent))

        write(forest, MENU)
        places.db.execute("COMMIT")
        with firefox.Reader(directory) as reader:
            got = sorted(as_tuples(reader.bookmarks()), key=repr)
            # An untitled bookmark shows its page's title, as Firefox does.
            want = [(u, t or page_titles[u], f, a) for u, t, f, a in expected(forest)]
            assert got == sorted(want, key=repr)
        places.db.close()
    finally:
        shutil.rmtree(directory)


PROFILE_NAME = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="[]\n\r"
    ),
    min_size=1,
    max_size=20,
).filter(lambda s: s.strip() == s and s)


@settings(max_examples=40, deadline=None)
@given(st.lists(PROFILE_NAME, min_size=1, max_size=5, unique=True), st.data())
def test_profiles_ini_round_trip(names, data):
    home = Path(tempfile.mkdtemp())
    try:
        base = home / ".mozilla/firefox"
        default = data.draw(st.integers(0, len(names) - 1))
        sections = {}
        for index, name in enumerate(names):
            folder = f"p{index}.default"
            (base / folder).mkdir(parents=True)
            sections[f"Profile{index}"] = {"Name": name, "IsRelative": "1", "Path": folder}
        sections[f"Install{default:016X}"] = {"Default": f"p{default}.default", "Locked": "1"}
        write_profiles_ini(base, sections)
        found = profiles.find(home, ["firefox"])
        assert [(p.name, p.default) for p in found] == [
            (name, index == default) for index, name in enumerate(names)
        ]
    finally:
        shutil.rmtree(home)


@given(MOMENTS)
def test_browser_clocks_round_trip(moment):
    assert times.chromium(times.to_chromium(moment)) == moment
    assert times.firefox(times.to_firefox(moment)) == moment
    if moment > dt.datetime(2001, 1, 1, tzinfo=dt.UTC):  # zero and below: "no time" to Safari
        assert times.safari(times.to_safari(moment)) == moment
    assert times.firefox(0) is None and times.chromium("0") is None and times.safari(-5.0) is None
    assert times.chromium(str(times.to_chromium(moment))) == moment  # Bookmarks: strings
