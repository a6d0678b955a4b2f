"""Importers and exporters: a quirky real-world Netscape file, and round trips as properties."""

import datetime as dt
import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marks import importing, transfer
from marks.library import Library, Record
from marks.store import Store

UTC = dt.UTC
DATA = Path(__file__).with_name("data")


def at(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, UTC)


def test_netscape_file_with_browser_quirks(library):
    report = transfer.import_file(library, "html", str(DATA / "quirks.html"))
    assert (report.added, report.updated, report.skipped, report.invalid) == (
        7,
        0,
        1,
        1,
    )  # a bookmarklet and a place: query kept (issue 25)
    by_url = {b.url: b for b in library.iterate()}
    python = by_url["https://www.python.org/"]
    assert python.title == "Welcome to Python.org" and python.tags == []  # root folder dropped
    assert python.added == at(1500000000) and python.last_visited == at(1700000000)
    assert python.visit_count == 1
    rust = by_url["https://docs.rust-lang.org/book/"]
    assert rust.tags == ["books", "Dev", "rust"]  # folder + TAGS + the duplicate's folder
    assert rust.added == at(1400000000)  # the duplicate was older: the earliest date wins
    assert rust.description == "The official book & guide — read it twice"
    assert rust.title == "The Rust Programming Language"
    mdn = by_url["https://developer.mozilla.org/en-US/"]
    assert mdn.tags == ["Dev/Web - Frontend"]  # nested folder; '/' in a folder name kept flat
    assert mdn.added == at(1520000000)  # milliseconds recognised
    cafe = by_url["https://Example.COM:443/caf%C3%A9#top"]
    assert cafe.title == "Café Zürich — Übersicht"
    article = by_url["https://example.org/article"]
    assert article.tags == ["Reading; Later"]  # a comma would split tags: replaced
    assert article.description == "Multi-line\ndescription here"
    assert by_url["javascript:alert('bookmarklet')"].title == "Bookmarklet"  # kept byte for byte
    assert "place:sort=8&maxResults=10" in by_url


def test_marked_root_folder_is_dropped_even_below_an_unclosed_list(library):
    from marks.formats import netscape

    html = (
        "<DL><p><DT><H3>Open</H3><DL><p>"  # never closed, as in a truncated export
        '<DT><H3 PERSONAL_TOOLBAR_FOLDER="true">Lesezeichenleiste</H3><DL><p>'
        '<DT><A HREF="https://a.example/">A</A></DL><p>'
    )
    (record,) = list(netscape.read(io.StringIO(html)))
    assert record.tags == ["Open"]


def test_folders_of_any_depth_stay_linear(library):
    depth = 400
    html = "<DL><p>" + "".join(f"<DT><H3>f{i}</H3><DL><p>" for i in range(depth))
    html += '<DT><A HREF="https://deep.example/">Deep</A>' + "</DL><p>" * (depth + 1)
    from marks.formats import netscape

    (record,) = list(netscape.read(io.StringIO(html)))
    assert record.tags == ["/".join(f"f{i}" for i in range(depth))]


# --- round trips ---------------------------------------------------------------------------------

text = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=30).map(
    str.strip
)
multiline = st.lists(text, max_size=3).map("\n".join).map(str.strip)
segment = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp", "Zs"), exclude_characters=",/"),
    min_size=1,
    max_size=10,
)
tag = st.lists(segment, min_size=1, max_size=3).map("/".join)
moment = st.integers(631152000, 1893456000).map(at)  # 1990 .. 2030, whole seconds


@st.composite
def libraries(draw):
    count = draw(st.integers(0, 12))
    records = []
    for number in range(count):
        records.append(
            Record(
                url=f"https://example.com/{number}/{draw(st.text('abcxyz019-_.~', max_size=8))}",
                title=draw(text),
                description=draw(multiline),
                tags=draw(st.lists(tag, max_size=4)),
                starred=draw(st.booleans()),
                archived=draw(st.booleans()),
                added=draw(moment),
                last_visited=draw(st.none() | moment),
                visit_count=draw(st.integers(0, 1000)),
                reachable=draw(st.none() | st.booleans()),
                last_checked=draw(st.none() | moment),
                check_result=draw(st.none() | text.filter(bool)),
            )
        )
    return records


def _fresh(tmp_path_factory) -> Library:
    return Library(Store(tmp_path_factory.mktemp("lib") / "library.db"))


def _round_trip(tmp_path_factory, records, fmt, **options):
    original = _fresh(tmp_path_factory)
    importing.import_records(original, records)
    out = io.StringIO()
    transfer.export(original, fmt, out, **options)
    path = tmp_path_factory.mktemp("file") / f"export.{fmt}"
    path.write_text(out.getvalue(), encoding="utf-8")
    copy = _fresh(tmp_path_factory)
    report = transfer.import_file(copy, fmt, str(path))
    assert report.invalid == 0 and report.added == original.count()
    return {b.url: b for b in original.iterate()}, {b.url: b for b in copy.iterate()}


ROUND_TRIP = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@ROUND_TRIP
@given(libraries())
def test_json_round_trip_is_lossless(tmp_path_factory, records):
    before, after = _round_trip(tmp_path_factory, records, "json")
    assert before.keys() == after.keys()
    for url, bookmark in before.items():
        assert after[url] == type(bookmark)(**{**_fields(bookmark), "id": after[url].id})


def _fields(bookmark) -> dict:
    return {name: getattr(bookmark, name) for name in bookmark.__struct_fields__}


@ROUND_TRIP
@given(libraries())
def test_hierarchical_html_round_trip_keeps_tags_dates_titles_descriptions(
    tmp_path_factory, records
):
    before, after = _round_trip(tmp_path_factory, records, "html", hierarchical=True)
    assert before.keys() == after.keys()
    for url, b in before.items():
        a = after[url]
        assert (a.title, a.description, a.added, a.last_visited) == (
            b.title,
            b.description,
            b.added,
            b.last_visited,
        )
        assert sorted(a.tags, key=str.casefold) == sorted(b.tags, key=str.casefold)
        # marks' own fields travel as attributes browsers ignore (issue 11, item 14)
        assert (a.starred, a.archived, a.visit_count) == (b.starred, b.archived, b.visit_count)
        assert (a.reachable, a.last_checked, a.check_result) == (
            b.reachable,
            b.last_checked,
            b.check_result,
        )


@ROUND_TRIP
@given(libraries())
def test_csv_round_trip(tmp_path_factory, records):
    before, after = _round_trip(tmp_path_factory, records, "csv")
    for url, b in before.items():
        a = after[url]
        assert (
            a.title,
            a.description,
            a.tags,
            a.starred,
            a.archived,
            a.added,
            a.last_visited,
            a.visit_count,
        ) == (
            b.title,
            b.description,
            b.tags,
            b.starred,
            b.archived,
            b.added,
            b.last_visited,
            b.visit_count,
        )


def test_flat_html_and_markdown_exports(library):
    library.add(
        "https://a.example/x?y=1&z=<2>",
        title='A "quoted" <title>',
        tags=["one/two"],
        description="d & e",
    )
    out = io.StringIO()
    transfer.export(library, "html", out)
    html = out.getvalue()
    assert html.startswith("<!DOCTYPE NETSCAPE-Bookmark-file-1>")
    assert 'HREF="https://a.example/x?y=1&amp;z=&lt;2&gt;"' in html
    assert "A &quot;quoted&quot; &lt;title&gt;</A>" in html and 'TAGS="one/two"' in html
    assert "<DD>d &amp; e" in html
    out = io.StringIO()
    transfer.export(library, "markdown", out)
    assert "## one" in out.getvalue()
    # HTML characters escaped in text (a viewer renders raw HTML); `<` in an <...> link is invalid
    assert (
        '- [A "quoted" \\<title\\>](<https://a.example/x?y=1&z=%3C2%3E>) `#one/two` — d \\& e'
        in out.getvalue()
    )


def test_text_import_reports_skipped_lines(library, tmp_path):
    path = tmp_path / "urls.txt"
    path.write_text(
        "https://a.example/\n\n# a comment\nnot a url\nhttps://b.example/page\nhttps://a.example\n"
    )
    report = transfer.import_file(library, "text", str(path))
    assert (report.added, report.skipped, report.invalid) == (2, 1, 1)
    assert "not a url" in report.problems[0]
