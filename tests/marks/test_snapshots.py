"""`marks snapshot ...` against a real local multi-host site: every stylesheet (with `@import` and
`url()`), image, font and frame inlined from another host, every script and handler gone, the cap,
what was left out, one fetch and one store shared with page content, search, and the database
commands (backup, integrity, migration of an older file)."""

import json
import zlib

import apsw
import pytest
from selectolax.lexbor import LexborHTMLParser

from marks import schema, urls
from marks.snapshots.sanitise import is_script_url
from marks.store import Store
from support.snapshotsite import FONT, SnapshotSite


@pytest.fixture
def site():
    with SnapshotSite() as running:
        yield running


def _ok(result):
    assert result.code == 0, result.err
    return result


def _inert(html: str) -> LexborHTMLParser:
    """The snapshot parsed, after checking nothing in it (frames included) can run."""
    tree = LexborHTMLParser(html)
    assert tree.css("script, base, link, object, embed") == []
    assert tree.css("meta[http-equiv]") == []
    for node in tree.root.traverse(include_text=False):
        for name, value in node.attributes.items():
            assert not name.lower().startswith("on"), (node.tag, name)
            assert value is None or not is_script_url(value), (node.tag, name, value)
            if name == "srcdoc":
                _inert(value)
    return tree


def _snapshot(marks, tmp_path, sid=1) -> str:
    _ok(marks("snapshot", "export", str(sid), str(tmp_path / f"s{sid}.html")))
    return (tmp_path / f"s{sid}.html").read_text(encoding="utf-8")


def test_take_inlines_everything_from_the_other_host_and_removes_every_script(
    marks, site, tmp_path
):
    _ok(marks("bookmark", "add", site.url("/article"), "--no-fetch"))
    result = _ok(marks("snapshot", "take", "1", "--verbose"))
    assert "stored" in result.out and "1 page(s)" in result.out
    # What was left out is said, with the reason.
    assert f"left out {site.other('/img/missing.png')}: HTTP 404" in result.out
    assert f"left out {site.other('/frame/3')}: iframe nested over 2 deep" in result.out

    tree = _inert(_snapshot(marks, tmp_path))
    styles = "\n".join(node.text() for node in tree.css("style"))
    assert "color: #123456" in styles  # <link rel=stylesheet> from the other host
    assert "letter-spacing: 2px" in styles  # @import inside a <style>
    assert "@media screen {@font-face" in styles  # @import url() screen; inside a stylesheet
    font = "data:font/woff2;base64," + __import__("base64").b64encode(FONT).decode()
    assert font in styles  # the font, whole
    assert 'url("data:image/gif;base64,' in styles and 'url("data:image/png;base64,' in styles
    assert "http://" not in styles  # nothing left to load
    for node in tree.css("img"):
        assert (node.attributes.get("src") or "data:image/").startswith("data:image/"), node.html
    assert tree.css_first("#missing").attributes.get("src") is None
    assert tree.css_first("source").attributes["srcset"].startswith("data:image/gif")
    frame = tree.css_first("iframe#frame")
    assert "src" not in frame.attributes
    inner = frame.attributes["srcdoc"]
    assert "Frame 1 says hello" in inner and "Frame 2 says hello" in inner
    assert "Frame 3" not in inner
    assert tree.css_first("#bad").attributes.get("href") is None
    assert tree.css_first("#rel").attributes["href"] == site.other("/elsewhere")  # <base> obeyed
    assert tree.css_first("body").attributes == {}
    # Scripts are never even fetched; each resource once, however often it is used.
    assert site.hits["/js/app.js"] == 0
    assert site.hits["/img/photo.png"] == 1  # used by the page and both frames, fetched once


def test_one_fetch_one_store_shared_with_content_and_search(marks, site, tmp_path, db_path):
    _ok(marks("bookmark", "add", site.url("/article"), "--no-fetch"))
    _ok(marks("snapshot", "take", "1"))
    assert site.hits["/article"] == 1
    # The same fetch is the bookmark's page content: its original, its text, its title.
    raw = _ok(marks("content", "view", "1", "--raw")).out
    assert 'document.title = "pwned by script"' in raw  # the page as served
    assert "skerries" in _ok(marks("content", "view", "1")).out
    assert json.loads(_ok(marks("-o", "json", "bookmark", "get", "1")).out)[0]["title"] == (
        "Lighthouse keepers"
    )
    hits = json.loads(_ok(marks("-o", "json", "bookmark", "search", "--fts", "skerries")).out)
    assert [hit["id"] for hit in hits] == [1]
    assert "Fog rolled over the skerries" in _ok(marks("snapshot", "view", "1")).out
    # Taken again, the same page is stored once more as a row, never as a second body.
    _ok(marks("snapshot", "take", "1"))
    store = Store(db_path)
    try:
        assert store.value("SELECT count(*) FROM snapshots") == 2
        assert store.value("SELECT count(*) FROM snapshot_blobs") == 2  # original + snapshot
        assert (
            store.value(
                "SELECT count(*) FROM pragma_table_info('page_content') WHERE name = 'original'"
            )
            == 0
        )
    finally:
        store.close()


def test_the_cap_leaves_out_what_does_not_fit_and_says_so(marks, site, tmp_path):
    site.pages["/page/big"] = (
        "text/html",
        f'<p>big one</p><img id="huge" src="{site.other("/img/huge.gif")}">'
        f'<img id="small" src="{site.other("/img/small.png")}">'.encode(),
    )
    _ok(marks("config", "set", "snapshot_max_mb", "1"))
    _ok(marks("bookmark", "add", site.url("/page/big"), "--no-fetch"))
    listed = json.loads(_ok(marks("-o", "json", "snapshot", "take", "1")).out)
    assert listed[0]["outcome"] == "stored"
    assert listed[0]["snapshot"]["omitted"] == [
        {"url": site.other("/img/huge.gif"), "reason": "over the 1 MB cap"}
    ]
    tree = _inert(_snapshot(marks, tmp_path))
    assert tree.css_first("#huge").attributes.get("src") is None
    assert tree.css_first("#small").attributes["src"].startswith("data:image/png")
    table = _ok(marks("snapshot", "list", "1")).out
    assert "LEFT_OUT" in table and " 1 " in table


def test_what_cannot_be_snapshotted_is_skipped_or_failed_with_a_reason(marks, site):
    _ok(marks("bookmark", "add", site.url("/article"), "--no-fetch"))
    _ok(marks("bookmark", "add", "ftp://files.example/a.txt", "--title", "ftp"))
    _ok(marks("bookmark", "add", "http://nowhere.invalid/", "--title", "gone"))
    _ok(marks("bookmark", "add", site.url("/page/absent"), "--title", "absent"))
    result = json.loads(_ok(marks("-o", "json", "snapshot", "take", "--query", "id > 0")).out)
    by_id = {item["bookmark_id"]: item for item in result}
    assert by_id[2]["outcome"] == "skipped" and "ftp: scheme" in by_id[2]["detail"]
    assert by_id[3]["outcome"] == "failed" and "nowhere.invalid" in by_id[3]["detail"]
    assert by_id[4]["outcome"] == "failed" and by_id[4]["detail"] == "HTTP 404"
    assert by_id[1]["outcome"] == "stored"
    # --missing: only bookmarks without a snapshot (the article has one now).
    again = json.loads(_ok(marks("-o", "json", "snapshot", "take", "--missing")).out)
    assert sorted(item["bookmark_id"] for item in again) == [2, 3, 4]
    assert site.hits["/article"] == 1
    bad = marks("snapshot", "take")
    assert (
        bad.code == 1 and bad.err.count("\n") == 1 and "IDS, --query EXPR or --missing" in bad.err
    )


def test_list_view_export_delete_and_prune(marks, site, tmp_path, db_path):
    _ok(marks("bookmark", "add", site.url("/article"), "--no-fetch"))
    for _ in range(3):
        _ok(marks("snapshot", "take", "1"))
    listed = json.loads(_ok(marks("-o", "json", "snapshot", "list")).out)
    assert [item["id"] for item in listed] == [3, 2, 1]
    assert {item["source"] for item in listed} == {"fetch"}
    assert _ok(marks("snapshot", "prune", "--keep", "1", "--yes")).err.startswith("deleted 2")
    assert [i["id"] for i in json.loads(_ok(marks("-o", "json", "snapshot", "list", "1")).out)] == [
        3
    ]
    _ok(marks("snapshot", "delete", "3"))
    assert json.loads(_ok(marks("-o", "json", "snapshot", "list")).out) == []
    store = Store(db_path)
    try:  # the snapshot's body went with its last snapshot; the page content's stays
        assert store.value("SELECT count(*) FROM snapshot_blobs") == 1
    finally:
        store.close()
    for args in (
        ("view", "3"),
        ("export", "3", str(tmp_path / "x.html")),
        ("delete", "3"),
        ("list", "99"),
    ):
        failed = marks("snapshot", *args)
        assert failed.code == 1 and failed.err.count("\n") == 1, (args, failed)
    _ok(marks("snapshot", "take", "1"))
    missing_dir = marks("snapshot", "export", "4", str(tmp_path / "no" / "x.html"))
    assert missing_dir.code == 1 and "does not exist" in missing_dir.err
    assert not (tmp_path / "no").exists()


def test_snapshot_on_add_takes_one_and_fills_the_title(marks, site):
    _ok(marks("config", "set", "snapshot_on_add", "true"))
    added = _ok(marks("bookmark", "add", site.url("/article")))
    assert "snapshot 1 taken" in added.err and "Lighthouse keepers" in added.out
    assert site.hits["/article"] == 1  # the snapshot's fetch filled the title: no second fetch
    assert len(json.loads(_ok(marks("-o", "json", "snapshot", "list")).out)) == 1


def test_backup_and_integrity_include_snapshots(marks, site, tmp_path, db_path):
    _ok(marks("bookmark", "add", site.url("/article"), "--no-fetch"))
    _ok(marks("snapshot", "take", "1"))
    _ok(marks("db", "backup", str(tmp_path / "copy.db")))
    copy = marks.__class__(tmp_path / "copy.db")
    assert len(json.loads(_ok(copy("-o", "json", "snapshot", "list")).out)) == 1
    assert "Fog rolled" in _ok(copy("snapshot", "view", "1")).out
    report = json.loads(_ok(marks("-o", "json", "db", "integrity")).out)
    assert report["integrity"] == "ok" and report["snapshots"] == 1 and report["stored_pages"] == 2
    # A stored page whose bytes changed is found and named.
    store = Store(db_path)
    try:
        store.execute(
            "UPDATE snapshot_blobs SET data = ? WHERE sha256 = "
            "(SELECT blob FROM snapshots WHERE id = 1)",
            (zlib.compress(b"tampered"),),
        )
    finally:
        store.close()
    broken = marks("db", "integrity")
    assert broken.code == 1 and "do not match its key" in broken.err


def test_an_older_file_moves_its_page_originals_into_the_store(tmp_path, marks, db_path):
    db = apsw.Connection(str(db_path))  # as marks of schema 8 left it (its SQL functions too)
    db.create_scalar_function("casefold", lambda text: text.casefold(), 1, deterministic=True)
    db.create_scalar_function("marks_url_key", urls.key, 1, deterministic=True)
    for script in schema.MIGRATIONS[:8]:
        db.execute(script)
    db.execute("PRAGMA user_version = 8")
    db.execute(
        "INSERT INTO bookmarks (url, url_key, title, added) VALUES "
        "('https://old.example/', 'https://old.example', 'Old', '2026-01-01T00:00:00Z')"
    )
    body = b"<html><body><p>kept before snapshots</p></body></html>"
    for bookmark in (1,):
        db.execute(
            "INSERT INTO page_content (bookmark_id, fetched_at, url, kind, size, original, text) "
            "VALUES (?, '2026-01-01T00:00:00Z', 'https://old.example/', 'html', ?, ?, "
            "'kept before snapshots')",
            (bookmark, len(body), zlib.compress(body)),
        )
    db.close()
    assert _ok(marks("content", "view", "1", "--raw")).out.strip() == body.decode()
    assert json.loads(_ok(marks("-o", "json", "db", "integrity")).out)["integrity"] == "ok"
    hits = json.loads(_ok(marks("-o", "json", "bookmark", "search", "--fts", "snapshots")).out)
    assert [hit["id"] for hit in hits] == [1]


def test_resources_keep_the_per_host_limit(marks, site):
    _ok(marks("config", "set", "health_per_host", "2"))
    _ok(marks("bookmark", "add", site.url("/gallery"), "--no-fetch"))
    listed = json.loads(_ok(marks("-o", "json", "snapshot", "take", "1")).out)
    assert listed[0]["outcome"] == "stored" and listed[0]["snapshot"]["omitted"] == []
    other = site.other().split("//")[1]
    assert site.hits["/img/slow19.png"] == 1
    assert 0 < site.peak[other] <= 2  # twenty images, never more than two at once


def test_frames_written_inline_count_toward_the_depth_too(marks, site, tmp_path):
    """An `<iframe srcdoc>` nests like an `<iframe src>`: past IFRAME_DEPTH (2) it is removed and
    said, and what is in it is never fetched (a page could otherwise nest frames without end, each
    level parsed, inlined and sanitised again)."""
    import html

    inner = f'<img id="deep" src="{site.other("/img/deep.png")}">'
    for level in (3, 2, 1):
        inner = f'<iframe id="f{level}" srcdoc="{html.escape(inner)}"></iframe>'
    site.pages["/page/nested"] = ("text/html", f"<p>outer</p>{inner}".encode())
    _ok(marks("bookmark", "add", site.url("/page/nested"), "--no-fetch"))
    listed = json.loads(_ok(marks("-o", "json", "snapshot", "take", "1")).out)
    assert listed[0]["outcome"] == "stored"
    assert site.hits["/img/deep.png"] == 0
    assert {"url": "about:srcdoc", "reason": "iframe nested over 2 deep"} in listed[0]["snapshot"][
        "omitted"
    ]
    outer = _inert(_snapshot(marks, tmp_path))
    second = LexborHTMLParser(outer.css_first("#f1").attributes["srcdoc"])
    third = LexborHTMLParser(second.css_first("#f2").attributes["srcdoc"])
    assert third.css_first("#f3") is None
