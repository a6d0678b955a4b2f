"""Every producer's export arrives whole: dates, flags, folders, tags and descriptions (issue 11,
items 1, 3, 4, 5, 9, 10). The fixtures in data/producers/ were written from each format's
documentation (see the README there)."""

import datetime as dt
from pathlib import Path

import pytest

from marks import transfer

UTC = dt.UTC
PRODUCERS = Path(__file__).with_name("data") / "producers"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def load(library, name: str, fmt: str = "auto", **options):
    report = transfer.import_file(library, fmt, str(PRODUCERS / name), **options)
    return report, {b.url: b for b in library.iterate()}


def test_folder_descriptions_never_land_on_bookmarks(library):
    report, found = load(library, "firefox.html", "html")
    assert report.added == 4
    assert found["https://menu.example/"].description == "A bookmark's own description"
    for url in ("https://toolbar.example/", "https://soup.example/", "https://other.example/"):
        assert found[url].description == "", url  # the folders' <DD> is not theirs


def test_browser_root_folders_are_dropped_in_any_language(library):
    _, found = load(library, "firefox.html", "html")
    assert found["https://toolbar.example/"].tags == []  # "Lesezeichen-Symbolleiste", marked
    assert found["https://soup.example/"].tags == ["Recipes"]
    assert found["https://other.example/"].tags == []  # "Autres marque-pages", marked


@pytest.mark.parametrize(
    "name",
    ["Favoris", "Lesezeichenleiste", "Barra de marcadores", "Otros marcadores", "Favourites bar"],
)
def test_unmarked_root_names_at_the_top_are_roots_in_every_language(library, tmp_path, name):
    path = tmp_path / "edge.html"
    path.write_text(
        f"<DL><p><DT><H3>{name}</H3><DL><p><DT><H3>{name}</H3><DL><p>"
        '<DT><A HREF="https://x.example/" ADD_DATE="1600000000">x</A></DL><p></DL><p></DL>'
    )
    transfer.import_file(library, "html", str(path))
    (bookmark,) = library.iterate()
    assert bookmark.tags == [name]  # the top one is the root; the same name below is a folder


def test_pocket_html_keeps_dates_tags_and_the_read_archive(library):
    report, found = load(library, "pocket.html", "html")
    story = found["https://unread.example/story"]
    assert story.added == at("2021-01-01T00:00:00") and not story.archived
    assert story.tags == ["long read", "news"]
    essay = found["https://read.example/essay"]
    assert essay.archived and essay.added == at("2020-01-01T00:00:00")
    assert report.undated == 1
    assert any("undated.example" in line and "no date" in line for line in report.problems)


def test_pocket_csv_status_tags_and_dates(library):
    report, found = load(library, "pocket.csv", "csv")
    unread = found["https://pocket-unread.example/"]
    assert unread.tags == ["long read", "news"] and not unread.archived
    assert unread.added == at("2021-01-01T00:00:00")
    assert found["https://pocket-read.example/"].archived
    assert report.undated == 2  # the empty date and the unreadable one, both listed
    assert any("'yesterday'" in line and "line 5" in line for line in report.problems)


def test_instapaper_folders_are_flags_and_selection_is_the_description(library):
    _, found = load(library, "instapaper.csv", "csv")
    starred = found["https://insta-star.example/"]
    assert starred.starred and starred.tags == []
    assert starred.description == "A sentence I highlighted"
    archived = found["https://insta-archive.example/"]
    assert archived.archived and archived.tags == []
    assert found["https://insta-unread.example/"].tags == []
    assert found["https://insta-folder.example/"].tags == ["Cooking"]
    assert found["https://insta-folder.example/"].added == at("2021-01-01T00:05:00")


def test_pinboard_json_fields(library):
    _, found = load(library, "pinboard.json", "json")
    one = found["https://pin-one.example/"]
    assert one.title == "Pinboard title" and one.description == "Longer notes about it"
    assert one.tags == ["private", "python", "toread", "web-dev"]
    assert one.added == at("2019-05-06T07:08:09")
    assert found["https://pin-two.example/"].tags == []


def test_raindrop_csv_keeps_folder_and_tags(library):
    _, found = load(library, "raindrop.csv", "csv")
    one = found["https://rain-one.example/"]
    assert one.tags == ["css", "design", "Reading"] and one.starred
    assert one.description == "My note" and one.added == at("2022-03-04T05:06:07")
    two = found["https://rain-two.example/"]
    assert two.tags == [] and two.description == "Only an excerpt" and not two.starred


def test_omnivore_labels_state_and_dates(library):
    report, found = load(library, "omnivore.json", "json")
    archived = found["https://omni-archived.example/article"]
    assert archived.archived and archived.tags == ["ml", "research"]
    assert archived.added == at("2023-10-01T12:34:56")
    inbox = found["https://omni-inbox.example/"]
    assert not inbox.archived and inbox.added == at("2023-10-01T12:00:00")  # RFC 2822
    assert report.undated == 0


def test_linkding_json_and_html(library):
    _, found = load(library, "linkding.json", "json")
    one = found["https://ld-one.example/"]
    assert one.archived and one.tags == ["selfhosted", "tools"]
    assert one.title == "Title from the page" and one.description == "my notes"
    assert one.added == at("2021-02-03T04:05:06")
    assert found["https://ld-two.example/"].tags == ["toread"]
    _, found = load(library, "linkding.html", "html")
    page = found["https://ld-html.example/"]
    assert page.tags == ["private", "selfhosted", "tools", "toread"]
    assert page.description == "Its description"
    assert found["https://ld-public.example/"].tags == []


def test_delicious_private_flag_and_notes(library):
    _, found = load(library, "delicious.html")
    one = found["https://del-one.example/"]
    assert one.tags == ["old", "private", "web"] and one.description == "Notes from 2010"
    assert one.added == at("2010-01-01T00:00:00")


def test_shaarli_notes_are_reported_by_title_or_resolved_with_base_url(library, marks):
    report, _ = load(library, "shaarli.html", "html")
    assert report.invalid == 1 and report.added == 1
    (line,) = [line for line in report.problems if "invalid" in line]
    assert '"My private note"' in line and "--base-url" in line and "line 10" in line
    result = marks(
        "import", "html", str(PRODUCERS / "shaarli.html"), "--base-url", "https://sh.example/"
    )
    assert result.code == 0 and result.err.startswith("added 1, updated 0, skipped 1, invalid 0")
    urls = marks("-o", "urls", "bookmark", "list").out.split()
    assert "https://sh.example/?aB3xYz" in urls


def test_chrome_bookmarks_file_by_shape_and_by_detection(library, marks, tmp_path):
    report, found = load(library, "chrome-Bookmarks.json", "json")
    assert report.added == 3
    bar = found["https://chrome-bar.example/"]
    assert bar.tags == [] and bar.added == at("2021-01-01T00:00:00")  # 1601 epoch, µs
    assert found["https://chrome-nested.example/"].tags == ["Work"]
    assert found["https://chrome-nested.example/"].added == at("2021-01-01T00:01:00")
    assert report.undated == 1  # "0" is Chrome's "no date": counted, listed
    # A file named `Bookmarks` (as in the profile) with no format named: detected as Chrome's.
    profile = tmp_path / "Bookmarks"
    profile.write_bytes((PRODUCERS / "chrome-Bookmarks.json").read_bytes())
    result = marks("import", str(profile), "--update")
    assert result.code == 0 and result.err.startswith("added 0, updated 3,")


def test_firefox_backup_json(library):
    report, found = load(library, "firefox-backup.json")
    assert set(found) == {
        "https://fx-menu.example/",
        "https://fx-project.example/",
        "https://fx-toolbar.example/",
        "place:sort=8&maxResults=10",  # Firefox's smart folder, kept as the browser keeps it
    }
    assert found["https://fx-menu.example/"].tags == ["fx", "menu"]
    project = found["https://fx-project.example/"]
    assert project.tags == ["Projects"] and project.description == "A described bookmark"
    assert project.added == at("2021-02-01T00:00:00")
    assert report.invalid == 0


def test_unknown_json_shape_says_what_it_expected_and_found(marks, tmp_path):
    path = tmp_path / "odd.json"
    path.write_text('{"meta": 1, "entries": []}')
    result = marks("import", "json", str(path))
    assert result.code == 1 and len(result.err.splitlines()) == 1
    assert "expected" in result.err and "Chrome" in result.err
    assert "found an object with keys meta, entries" in result.err


@pytest.mark.parametrize(
    "name",
    ["pocket.csv", "instapaper.csv", "raindrop.csv", "pinboard.json", "pocket.html"],
)
def test_format_detection_matches_the_named_format(library, tmp_path, name):
    report, _ = load(library, name)
    assert report.added >= 2 and report.invalid == 0
