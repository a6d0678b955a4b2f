"""`marks content refresh|view|auto-tag` and the title fetch of `bookmark add`, against a real local
web server: HTML, PDF, huge and binary bodies, unchanged pages, search in page text."""

import json

import pytest

from marks.content import Content
from marks.extract import Page, html_text
from marks.library import Library
from marks.store import Store
from support.websites import Websites


@pytest.fixture(scope="module")
def web():
    with Websites(hosts=2, slow_seconds=3) as sites:
        sites.pages["whale"] = ("Whales", "The narwhal sings under the arctic ice.")
        sites.pages["rust"] = ("Rust book", "Ownership and borrowing explained with lifetimes.")
        yield sites


def _add(marks, url, *options):
    result = marks("bookmark", "add", url, *options)
    assert result.code == 0, result.err
    return result


def test_refresh_stores_text_and_fills_empty_title(marks, web):
    _add(marks, web.url("/page/whale"), "--no-fetch")
    _add(marks, web.url("/page/rust"), "--title", "My own title", "--no-fetch")
    result = marks("content", "refresh", "--all", "-v")
    assert result.code == 0, result.err
    assert "stored" in result.out and "2 page(s)" in result.out
    whale = json.loads(marks("--output", "json", "bookmark", "get", "1").out)[0]
    assert whale["title"] == "Whales" and whale["description"] == "About Whales"
    own = json.loads(marks("--output", "json", "bookmark", "get", "2").out)[0]
    assert own["title"] == "My own title"  # never replaced
    text = marks("content", "view", "1").out
    assert "narwhal sings" in text and "Second paragraph with bold words." in text
    assert "scriptword" not in text and "footerword" not in text and "Login" not in text
    raw = marks("content", "view", "1", "--raw").out
    assert raw.startswith("<!doctype html>") and "scriptword" in raw


def test_page_text_is_searchable_everywhere(marks, web):
    _add(marks, web.url("/page/whale"), "--title", "Sea animals", "--no-fetch")
    before = marks("bookmark", "search", "--fts", "narwhal")
    assert before.out == ""
    assert marks("content", "refresh", "1").code == 0
    hits = marks("--output", "json", "bookmark", "search", "--fts", "narwhal")
    found = json.loads(hits.out)
    assert [hit["id"] for hit in found] == [1] and "[narwhal]" in found[0]["snippet"]
    assert json.loads(marks("-o", "json", "bookmark", "search", "--fts", "arctic ice").out)
    shell = marks.process("shell", "-c", "find narwhal")
    assert shell.code == 0 and "Sea animals" in shell.out
    # Deleting the bookmark removes the text from the index too.
    assert marks("bookmark", "delete", "1", "--yes").code == 0
    assert marks("bookmark", "search", "--fts", "narwhal").out == ""
    assert marks("db", "build-index").code == 0


def test_pdf_huge_binary_and_failures(marks, web):
    for path in ("/doc.pdf", "/huge", "/binary", "/status/404"):
        _add(marks, web.url(path), "--title", path, "--no-fetch")
    result = marks("--output", "json", "content", "refresh", "--all")
    assert result.code == 0, result.err
    by_url = {item["url"]: item for item in json.loads(result.out)}
    pdf = by_url[web.url("/doc.pdf")]
    assert (pdf["outcome"], pdf["kind"]) == ("stored", "pdf")
    assert "zeppelin" in marks("content", "view", "1").out
    assert by_url[web.url("/huge")]["outcome"] == "too_large"
    binary = by_url[web.url("/binary")]
    assert (binary["outcome"], binary["kind"], binary["content_type"]) == (
        "stored",
        "other",
        "application/octet-stream",
    )
    assert by_url[web.url("/status/404")]["outcome"] == "failed"
    assert "HTTP 404" in by_url[web.url("/status/404")]["detail"]
    assert json.loads(marks("-o", "json", "bookmark", "search", "--fts", "zeppelin").out)
    missing = marks("content", "view", "4")
    assert missing.code == 1 and missing.err.startswith("marks: ")


def test_unchanged_pages_are_not_downloaded_again(marks, web):
    _add(marks, web.url("/etag/one"), "--title", "tagged", "--no-fetch")
    first = marks("--output", "json", "content", "refresh", "1")
    assert json.loads(first.out)[0]["outcome"] == "stored"
    second = marks("--output", "json", "content", "refresh", "1")
    assert json.loads(second.out)[0]["outcome"] == "unchanged"
    assert "etagged body" in marks("content", "view", "1").out  # kept
    forced = marks("--output", "json", "content", "refresh", "1", "--force")
    assert json.loads(forced.out)[0]["outcome"] == "stored"


def test_a_failed_refresh_keeps_what_was_stored(db_path, web):
    library = Library(Store(db_path))
    bookmark = library.add(web.url("/page/whale"))
    pages = Content(library)
    pages.plan([bookmark.id])
    pages.refresh()
    library.update(bookmark.id, url=web.url("/status/500"))
    pages.plan([bookmark.id])
    summary = pages.refresh()
    assert summary.by_outcome == {"failed": 1}
    assert "narwhal" in pages.view(bookmark.id)


def test_refresh_needs_a_selection_and_checks_ids(marks):
    nothing = marks("content", "refresh")
    assert nothing.code == 1 and "IDS, --all or --query" in nothing.err
    missing = marks("content", "refresh", "7")
    assert missing.code == 1 and missing.err == "marks: no such bookmark 7\n"


def test_query_selects_pages(marks, web):
    _add(marks, web.url("/page/whale"), "--title", "w", "--no-fetch")
    _add(marks, web.url("/page/rust"), "--title", "r", "--no-fetch")
    result = marks("-o", "json", "content", "refresh", "--query", "url ~ rust")
    assert [item["id"] for item in json.loads(result.out)] == [2]


def test_extractors_are_asked_first(db_path, web):
    library = Library(Store(db_path))
    bookmark = library.add(web.url("/page/whale"))

    def shout(page: Page):
        found = html_text(page)
        found.text = found.text.upper()
        return found

    pages = Content(library, extractors=[lambda page: None, shout])
    pages.plan([bookmark.id])
    pages.refresh()
    assert "NARWHAL SINGS" in pages.view(bookmark.id)


def test_auto_tag_suggests_and_applies(marks, web):
    web.pages["py1"] = ("Python asyncio", "asyncio coroutines asyncio tasks asyncio loops")
    web.pages["py2"] = ("More python", "python decorators python generators")
    _add(marks, web.url("/page/py1"), "--no-fetch", "--tag", "asyncio")
    _add(marks, web.url("/page/py2"), "--no-fetch")
    _add(marks, web.url("/page/whale"), "--no-fetch")
    assert marks("content", "refresh", "--all").code == 0
    listed = json.loads(marks("-o", "json", "content", "auto-tag", "2").out)
    assert listed and all(item["id"] == 2 for item in listed)
    assert "python" in [item["tag"] for item in listed]
    assert all(0 < item["score"] <= 1 for item in listed)
    refused = marks("content", "auto-tag", "--all", "--apply")
    assert refused.code == 1 and "--yes" in refused.err  # bulk: asks first
    applied = marks("content", "auto-tag", "2", "--apply", "--min-score", "0.9")
    assert applied.code == 0 and "added" in applied.err
    tags = json.loads(marks("-o", "json", "bookmark", "get", "2").out)[0]["tags"]
    assert "python" in tags


# --- bookmark add fetches the title (issue 11, item 18) -------------------------------------------


def test_add_fetches_title_and_description(marks, web):
    web.pages["news"] = ("Daily news", "Nothing happened.")
    added = marks("--output", "json", "bookmark", "add", web.url("/page/news"))
    assert added.code == 0 and added.err == ""
    record = json.loads(added.out)[0]
    assert (record["title"], record["description"]) == ("Daily news", "About Daily news")


def test_add_keeps_the_given_title_and_no_fetch_skips(marks, web):
    web.hits.clear()
    given = json.loads(
        marks("-o", "json", "bookmark", "add", web.url("/page/a1"), "--title", "Mine").out
    )[0]
    assert given["title"] == "Mine"
    skipped = json.loads(
        marks("-o", "json", "bookmark", "add", web.url("/page/a2"), "--no-fetch").out
    )
    assert skipped[0]["title"] == ""
    assert web.hits[("127.0.0.1", "/page/a1")] == 0 and web.hits[("127.0.0.1", "/page/a2")] == 0


def test_add_offline_is_not_an_error(marks, web):
    for url in ("http://offline.invalid/page", web.closed_url, web.url("/status/404")):
        result = marks("bookmark", "add", url)
        assert result.code == 0, result.err
        assert (
            result.err.startswith("marks: no title fetched for ")
            and len(result.err.splitlines()) == 1
        )
    assert len(json.loads(marks("-o", "json", "bookmark", "list").out)) == 3


def test_add_waits_for_a_slow_page_within_its_timeout(marks, web):
    result = marks("bookmark", "add", web.url("/slow?add"))  # the server answers after 3 s
    assert result.code == 0
    # 5 s is the add timeout; the page answers in 3 s, so its (plain) body was read.
    assert "no title fetched" not in result.err


def test_fetch_on_add_config_key(marks, web):
    assert marks("config", "set", "fetch_on_add", "false").code == 0
    added = json.loads(marks("-o", "json", "bookmark", "add", web.url("/page/cfg")).out)[0]
    assert added["title"] == ""
