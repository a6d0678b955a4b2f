"""Import robustness: identity keys, bad items, listing, charsets, odd HTML (issue 11, items 2,
6, 7, 8, 9, 14)."""

import datetime as dt
import io
import json

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marks import importing, maintenance, schema, transfer, urls
from marks.library import Library
from marks.store import Store

UTC = dt.UTC


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


# --- item 2: the fragment is identity; the key is a real normalisation --------------------------


def test_fragment_only_differences_are_different_bookmarks(library, marks, tmp_path):
    html = "".join(
        f'<DT><A HREF="{url}" ADD_DATE="1600000000">t</A>\n'
        for url in (
            "https://mail.example/mail/u/0/#inbox/A",
            "https://mail.example/mail/u/0/#inbox/B",
            "https://groups.example/forum/#!topic/x",
            "https://docs.example/file.pdf#page44",
            "https://docs.example/file.pdf",
        )
    )
    report = transfer.import_file(library, "html", write(tmp_path, "f.html", f"<DL>{html}</DL>"))
    assert (report.added, report.skipped) == (5, 0)
    added = marks("bookmark", "add", "https://docs.example/file.pdf#page45")
    assert added.code == 0
    again = marks("bookmark", "add", "https://DOCS.example:443/file.pdf#page45")
    assert again.code == 1 and "already bookmarked" in again.err


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("https://EXAMPLE.com:443/a%7e", "https://example.com/a~"),
        ("http://example.com", "http://example.com/"),
        ("https://bücher.example/", "https://xn--bcher-kva.example/"),
        ("https://example.com/caf%c3%a9", "https://example.com/café"),
        ("HTTPS://example.com/?q=%3d", "https://example.com/?q=%3D"),
    ],
)
def test_url_key_is_rfc3986_normal_form(one, other):
    assert urls.key(one) == urls.key(other)


def test_url_key_keeps_what_distinguishes_pages():
    assert urls.key("https://a.example/#x") != urls.key("https://a.example/#y")
    assert urls.key("https://a.example/A") != urls.key("https://a.example/a")
    assert urls.key("https://a.example/%2F") != urls.key("https://a.example//")
    assert urls.key("https://a.example:8443/") != urls.key("https://a.example/")


url_text = st.from_regex(
    r"(?i)https?://[a-z0-9.-]{1,12}(:\d{1,5})?(/[a-z0-9%~._\-/?#=&+;@:!$'()*,\[\]]{0,20})?",
    fullmatch=True,
)


@settings(max_examples=300, deadline=None)
@given(url_text)
def test_url_key_fast_path_agrees_with_the_full_normalisation(url):
    fast = urls.plain(url)
    if fast is not None:
        assert fast[1] == urls.key(url)
    assert urls.key(urls.key(url)) == urls.key(url)  # a normal form is its own normal form


# The fast path takes non-ASCII paths, queries and fragments too (a tenth of a lifetime's URLs):
# whatever it accepts, it must key and group exactly as urlsplit and the full normalisation do,
# Unicode spaces and separators, `#` inside a fragment and empty parts included.
non_ascii_url = st.tuples(
    st.from_regex(r"(?i)https?://(www\.)?[a-z0-9.-]{1,8}(:\d{1,5})?", fullmatch=True),
    st.text(
        alphabet=st.sampled_from(list("/?#=&a%~ é東京Zü\u00a0\u3000\u2028\u0085\ufeff😀")),
        max_size=16,
    ),
).map("".join)


@settings(max_examples=500, deadline=None)
@given(non_ascii_url)
def test_url_key_fast_path_agrees_for_non_ascii_urls(url):
    fast = urls.plain(url)
    if fast is not None:
        assert fast == (url, urls.key(url), urls.domain(url.strip()))
        assert urls.analyse(url) == fast


# `db dedupe` keys every bookmark with loose_key; its fast path (no urlsplit for a URL without a
# query) must group exactly as the general rules: `www.`, ports, trailing slashes, fragments.
loose_url = st.tuples(
    st.sampled_from(["http", "HTTPS", "https", "ftp"]),
    st.sampled_from(["a.example", "WWW.a.example", "www.", "www", "..a", "x-y.example"]),
    st.sampled_from(["", ":80", ":443", ":8080", ":0"]),
    st.text(alphabet=st.sampled_from(list("/?#=&a~%éZ")), max_size=12),
).map(lambda parts: f"{parts[0]}://{parts[1]}{parts[2]}{parts[3]}")


@settings(max_examples=400, deadline=None)
@given(loose_url | url_text | non_ascii_url)
def test_loose_key_fast_path_groups_as_the_general_rules(url):
    assert maintenance.loose_key(url) == maintenance._general_loose_key(url)


def _old_database(path, rows):
    """A library at schema 2 (before url_key was normalised), with its old keys."""
    db = apsw.Connection(str(path))
    db.execute(schema.MIGRATIONS[0])
    db.execute(schema.MIGRATIONS[1])
    for number, (url, old_key) in enumerate(rows, 1):
        db.execute(
            "INSERT INTO bookmarks (url, url_key, title, added) VALUES (?, ?, ?, ?)",
            (url, old_key, f"title {number}", f"2020-01-0{number}T00:00:00Z"),
        )
    db.execute("PRAGMA user_version = 2")
    db.close()


def test_migration_recomputes_keys_and_keeps_collisions(tmp_path, marks):
    path = tmp_path / "old.db"
    _old_database(
        path,
        [
            ("https://example.com/a%7e", "https://example.com/a%7e"),
            ("https://EXAMPLE.com:443/a~", "https://example.com/a~"),
            ("https://mail.example/#inbox/A", "https://mail.example/"),
        ],
    )
    store = Store(path)
    assert any("1 bookmark(s) are now the same page" in notice for notice in store.notices)
    library = Library(store)
    assert library.count() == 3  # nothing lost
    assert library.find_by_url("https://example.com/a~").id == 1  # the oldest takes the key
    assert library.find_by_url("https://mail.example/#inbox/A").id == 3
    library.add("https://mail.example/#inbox/B")  # the fragment now makes a new bookmark
    store.close()
    marks.db = path
    info = json.loads(marks("-o", "json", "db", "info").out)
    assert info["url_key_collisions"] == 1
    dedupe = marks("--yes", "db", "dedupe")
    assert "keep 1" in dedupe.err and "merged" in dedupe.err


def test_dedupe_offers_fragment_only_near_duplicates(marks):
    assert marks("bookmark", "add", "https://docs.example/file.pdf#page44").code == 0
    assert marks("bookmark", "add", "https://docs.example/file.pdf#page45").code == 0
    result = marks("db", "dedupe")  # no terminal, no --yes: shows and refuses
    assert "#page44" in result.err and "#page45" in result.err
    assert len(marks("-o", "urls", "bookmark", "list").out.split()) == 2


# --- item 6: one bad item never costs the others -------------------------------------------------

BAD_JSON = [
    {"url": "https://ok.example/", "title": "fine", "added": "2021-01-01T00:00:00Z"},
    {"url": "https://visits.example/", "visit_count": "x"},
    {"url": "https://emptytag.example/", "tags": ["", "kept"]},
    {"url": "https://baddate.example/", "added": "the day before"},
    {"url": "https://notstarred.example/", "starred": "no"},
    {"title": "no url at all"},
    "a string where an object belongs",
    {"url": 42},
]


def test_bad_json_items_are_reported_and_the_rest_imported(library, tmp_path):
    path = write(tmp_path, "bad.json", json.dumps(BAD_JSON))
    report = transfer.import_file(library, "json", path)
    assert (report.added, report.invalid) == (5, 3)
    found = {b.url: b for b in library.iterate()}
    assert found["https://visits.example/"].visit_count == 0
    assert found["https://emptytag.example/"].tags == ["kept"]
    assert not found["https://notstarred.example/"].starred
    assert found["https://ok.example/"].added == dt.datetime(2021, 1, 1, tzinfo=UTC)
    problems = "\n".join(report.problems)
    assert "item 2: repaired (visit_count" in problems and "https://visits.example/" in problems
    assert "item 3: repaired (empty tag" in problems
    assert "item 4: repaired (date: unreadable date 'the day before')" in problems
    assert "item 6: invalid" in problems and '"no url at all"' in problems
    assert "item 7: invalid" in problems and "item 8: invalid" in problems
    assert report.undated == 4  # the unreadable date and the three that gave none


def test_strict_refuses_the_whole_file_and_changes_nothing(marks, tmp_path):
    assert marks("bookmark", "add", "https://seed.example/").code == 0
    path = write(tmp_path, "bad.json", json.dumps(BAD_JSON))
    result = marks("import", "json", path, "--strict")
    assert result.code == 1 and len(result.err.splitlines()) == 1
    assert "--strict" in result.err and "item 2" in result.err
    assert marks("-o", "urls", "bookmark", "list").out.split() == ["https://seed.example/"]
    good = write(tmp_path, "good.json", json.dumps(BAD_JSON[:1]))
    assert marks("import", "json", good, "--strict").code == 0


# --- item 7: --verbose lists every entry it did not simply add ----------------------------------


def test_verbose_lists_duplicates_and_invalid_entries_with_lines(marks, tmp_path):
    html = (
        "<DL><p>\n"
        '<DT><A HREF="https://dup.example/" ADD_DATE="1600000000">First</A>\n'
        '<DT><A HREF="notaurl" ADD_DATE="1600000000">Broken one</A>\n'
        '<DT><A HREF="https://dup.example/" ADD_DATE="1600000000">Second</A>\n'
        "</DL>\n"
    )
    result = marks("import", "html", write(tmp_path, "d.html", html), "--verbose")
    assert result.code == 0
    assert "line 4: same page as line 2, merged into one bookmark: https://dup.example/" in (
        result.err
    )
    assert 'line 3: invalid (not a URL (scheme missing): notaurl): notaurl "Broken one"' in (
        result.err
    )


def test_duplicates_across_batches_are_merged_and_listed(library, tmp_path, monkeypatch):

    monkeypatch.setattr(importing, "BATCH", 2)  # the duplicate arrives in a later batch
    lines = [f'<DT><A HREF="https://p{n}.example/" ADD_DATE="1600000000">{n}</A>' for n in range(5)]
    lines.append('<DT><A HREF="https://p0.example/" ADD_DATE="1500000000" TAGS="late">again</A>')
    report = transfer.import_file(library, "html", write(tmp_path, "b.html", "\n".join(lines)))
    assert (report.added, report.skipped) == (5, 1)
    first = library.find_by_url("https://p0.example/")
    assert first.tags == ["late"] and first.added == dt.datetime.fromtimestamp(1500000000, UTC)
    assert "line 6: same page as an earlier entry" in report.problems[0]
    assert library.search("late", fts=True)  # the merged tag is in the index


# --- item 8: charsets and CSV dialects -----------------------------------------------------------


def test_html_declared_charset_is_honoured(library, tmp_path):
    html = (
        '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=ISO-8859-1">'
        '<DL><DT><A HREF="https://latin.example/">Caf\xe9 cr\xe8me</A></DL>'
    ).encode("latin-1")
    report = transfer.import_file(library, "html", write(tmp_path, "l.html", html))
    assert report.warnings == []
    assert library.find_by_url("https://latin.example/").title == "Café crème"


def test_html_with_utf16_bom(library, tmp_path):
    html = '<DL><DT><A HREF="https://wide.example/">Größe</A></DL>'.encode("utf-16")
    transfer.import_file(library, "html", write(tmp_path, "w.html", html))
    assert library.find_by_url("https://wide.example/").title == "Größe"


def test_undeclared_non_utf8_html_falls_back_to_cp1252_with_a_warning(marks, tmp_path):
    html = b'<DL><DT><A HREF="https://win.example/">\x93Quoted\x94 \x80</A></DL>'  # cp1252
    result = marks("import", "html", write(tmp_path, "c.html", html))
    assert result.code == 0 and "warning: not UTF-8" in result.err and "Windows-1252" in result.err
    titles = json.loads(marks("-o", "json", "bookmark", "list").out)
    assert titles[0]["title"] == "\u201cQuoted\u201d \u20ac"


def test_csv_encoding_option_and_bom(library, marks, tmp_path):
    latin = "url,title\nhttps://enc.example/,\xdcber caf\xe9\n".encode("latin-1")
    path = write(tmp_path, "l.csv", latin)
    failed = marks("import", "csv", path)
    assert failed.code == 1 and "--encoding" in failed.err
    assert marks("import", "csv", path, "--encoding", "latin-1").code == 0
    bom = "url,title\nhttps://bom.example/,Bom\n".encode("utf-16")
    assert marks("import", "csv", write(tmp_path, "b.csv", bom)).code == 0
    assert "https://bom.example/" in marks("-o", "urls", "bookmark", "list").out


@pytest.mark.parametrize("separator", [";", "\t"])
def test_csv_with_semicolon_or_tab_delimiters(library, tmp_path, separator):
    text = separator.join(["url", "title", "tags"]) + "\n"
    text += separator.join(["https://semi.example/", "A, with comma", "x"]) + "\n"
    report = transfer.import_file(library, "csv", write(tmp_path, "s.csv", text))
    bookmark = library.find_by_url("https://semi.example/")
    assert report.added == 1 and bookmark.title == "A, with comma" and bookmark.tags == ["x"]


def test_headerless_csv_one_url_per_row(library, tmp_path):
    text = "https://one.example/\nhttps://two.example/,ignored\n\nnot a url\n"
    report = transfer.import_file(library, "csv", write(tmp_path, "h.csv", text))
    assert (report.added, report.invalid) == (2, 1)
    assert "line 4: invalid" in " ".join(report.problems)


# --- item 9: odd HTML ---------------------------------------------------------------------------


def test_unclosed_anchor_keeps_its_bookmark(library):
    from marks.formats import netscape

    html = (
        '<DL><p><DT><A HREF="https://open.example/" ADD_DATE="1600000000">Never closed\n'
        '<DT><A HREF="https://next.example/">Next</A>\n<DT><A HREF="https://last.example/">Last'
    )
    found = {r.url: r.title for r in netscape.read(html)}
    assert found == {
        "https://open.example/": "Never closed",
        "https://next.example/": "Next",
        "https://last.example/": "Last",
    }


def test_url_with_spaces_is_percent_encoded_and_reported(library, tmp_path):
    html = '<DL><DT><A HREF=" https://sp.example/a b?q=c d ">Spaces</A></DL>'
    report = transfer.import_file(library, "html", write(tmp_path, "s.html", html))
    assert report.added == 1 and report.repaired == 1
    assert library.find_by_url("https://sp.example/a%20b?q=c%20d").title == "Spaces"
    assert "spaces in the URL percent-encoded" in report.problems[0]


# --- item 14: HTML export keeps marks' own fields ------------------------------------------------


def test_html_round_trip_keeps_starred_archived_and_check_results(library, tmp_path):
    importing.import_records(
        library,
        [
            transfer.Record(
                url="https://kept.example/",
                starred=True,
                archived=True,
                visit_count=7,
                reachable=False,
                last_checked=dt.datetime(2024, 5, 6, tzinfo=UTC),
                check_result="404 Not Found",
                added=dt.datetime(2020, 1, 1, tzinfo=UTC),
            )
        ],
    )
    out = io.StringIO()
    transfer.export(library, "html", out)
    assert 'STARRED="1"' in out.getvalue() and 'ARCHIVED="1"' in out.getvalue()
    copy = Library(Store(tmp_path / "copy.db"))
    transfer.import_file(copy, "html", write(tmp_path, "e.html", out.getvalue()))
    (bookmark,) = copy.iterate()
    assert (bookmark.starred, bookmark.archived, bookmark.visit_count) == (True, True, 7)
    assert (bookmark.reachable, bookmark.check_result) == (False, "404 Not Found")
    assert bookmark.last_checked == dt.datetime(2024, 5, 6, tzinfo=UTC)


def test_an_import_leaves_indexes_and_triggers_as_they_were(library, tmp_path):
    def schema_of(store):
        return store.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name").fetchall()

    before = schema_of(library.store)
    path = write(tmp_path, "u.txt", "https://a.example/\nhttps://b.example/\nnot a url\n")
    transfer.import_file(library, "text", path)
    assert schema_of(library.store) == before
    library.store.execute("PRAGMA integrity_check")
    assert library.store.value("PRAGMA integrity_check") == "ok"
    assert [hit.bookmark.url for hit in library.search("b.example", fts=True)] == [
        "https://b.example/"
    ]


def test_bookmark_add_encodes_spaces_like_a_browser(marks):
    added = marks("-o", "json", "bookmark", "add", "https://sp.example/a b")
    assert added.code == 0 and json.loads(added.out)[0]["url"] == "https://sp.example/a%20b"
    refused = marks("bookmark", "add", "not a url")
    assert refused.code == 1 and "not a URL" in refused.err


def test_marks_json_without_a_zone_is_read_as_utc(library, tmp_path):
    path = write(
        tmp_path, "n.json", '[{"url": "https://n.example/", "added": "2021-01-01T10:00:00"}]'
    )
    report = transfer.import_file(library, "json", path)
    assert report.added == 1 and report.undated == 0
    assert library.find_by_url("https://n.example/").added == dt.datetime(
        2021, 1, 1, 10, tzinfo=UTC
    )
