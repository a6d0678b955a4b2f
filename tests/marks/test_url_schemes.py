"""Every bookmark a browser keeps (issue 25, item 6): bookmarklets, `file:`, `ftp:`, `mailto:`,
`apt:`, `about:`, `chrome:`, Firefox's `place:` queries... are imported, exported back byte for
byte, never fetched, and shown inert in the web UI (a bookmarklet is copied, never run)."""

import io
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marks import transfer, urls
from marks.library import Library
from marks.store import Store

KEPT = [
    "javascript:(function(){alert('a b & <c> \"d\"?x#y');})()",
    "javascript:void(0)",
    "apt://flashplugin-installer",
    "place:sort=8&maxResults=10",
    "about:config",
    "chrome://settings/",
    "chrome-extension://abcdefghijklmnop/options.html",
    "file:///home/me/notes.txt",
    "ftp://ftp.example/pub/",
    "mailto:me@example.org?subject=Hi%20there",
    "view-source:https://example.org/",
    "data:text/plain,hello",
]


def test_the_keys_of_unknown_schemes_touch_nothing_but_the_scheme():
    assert urls.key("JavaScript:alert('A')?#") == "javascript:alert('A')?#"
    assert urls.key("APT://Flash") == "apt://Flash"
    assert urls.key("place:sort=8") == "place:sort=8"
    # still not URLs: a drive letter, a host with a port, a Shaarli relative link
    for text in ("c:\\notes.txt", "localhost:8080/x", "?abc123"):
        try:
            urls.analyse(text)
        except urls.InvalidURL:
            continue
        raise AssertionError(f"{text} was taken for a URL")


def test_a_chrome_file_with_apt_and_bookmarklets_keeps_them_all(marks, tmp_path):
    nodes = [
        {"type": "url", "name": f"n{n}", "url": url, "date_added": "13300000000000000"}
        for n, url in enumerate(KEPT)
    ]
    path = tmp_path / "Bookmarks"
    path.write_text(json.dumps({"roots": {"bookmark_bar": {"children": nodes}}, "version": 1}))
    result = marks("import", "json", str(path))
    assert result.code == 0 and f"added {len(KEPT)}," in result.err and "invalid 0" in result.err
    listed = json.loads(marks("-o", "json", "bookmark", "list").out)
    assert sorted(b["url"] for b in listed) == sorted(KEPT)


def test_health_and_content_skip_them_saying_why(marks, tmp_path):
    path = tmp_path / "kept.txt"
    path.write_text("".join(url + "\n" for url in KEPT))
    assert marks("import", "text", str(path)).code == 0
    health = marks("bookmark", "health")
    assert health.code == 0, health
    assert f"skipped {len(KEPT)} that are not http(s) links" in health.out
    content = marks("content", "refresh", "--all")
    assert content.code == 0, content
    assert f"skipped {len(KEPT)} that are not http(s) pages (never fetched)" in content.out


def _round_trip(fmt: str, found: list[str]) -> list[str]:
    with tempfile.TemporaryDirectory() as where:
        first, second = Store(Path(where) / "a.db"), Store(Path(where) / "b.db")
        try:
            source = Path(where) / f"in.{fmt}"
            out = io.StringIO()
            body = "".join(u + "\n" for u in found) if fmt == "text" else None
            if body is not None:
                source.write_text(body)
                transfer.import_file(Library(first), "text", str(source))
                fmt = "json"
            else:
                source.write_text(json.dumps([{"url": u} for u in found]))
                transfer.import_file(Library(first), "json", str(source))
            transfer.export(Library(first), fmt, out)
            exported = Path(where) / f"out.{fmt}"
            exported.write_text(out.getvalue(), encoding="utf-8")
            report = transfer.import_file(Library(second), fmt, str(exported))
            assert report.invalid == 0 and report.repaired == 0, report
            return sorted(b.url for b in Library(second).iterate())
        finally:
            first.close()
            second.close()


_BODY = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
).filter(lambda text: text == text.strip())
_URL = st.builds(
    lambda scheme, body: f"{scheme}:{body}",
    # schemes kept verbatim; the known ones (about:, file:, mailto:...) are repaired as before
    st.sampled_from(["javascript", "place", "apt", "view-source", "x-custom", "moz-extension"]),
    _BODY,
).filter(lambda url: urls.scheme_of(url) is not None)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=st.lists(_URL, min_size=1, max_size=5, unique_by=urls.key))
def test_import_export_import_keeps_these_urls_byte_exact(found):
    for fmt in ("json", "html", "csv"):
        assert _round_trip(fmt, found) == sorted(found), fmt


def test_the_fixed_examples_survive_every_format():
    for fmt in ("json", "html", "csv", "text"):
        assert _round_trip(fmt, KEPT) == sorted(KEPT), fmt
