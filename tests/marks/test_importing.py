"""The import's own bookkeeping: the report's lines spooled instead of held, the JSON report
streamed from the spool, merges tracked in temporary tables (marks.importing)."""

import json

import msgspec
import pytest

from marks import importing, transfer
from marks.importing import ProblemLog, report_json
from marks.library import Invalid
from marks.wire import ImportReport

ODD_LINES = [
    "line 3: invalid (no URL): (no URL)",
    'item 9: repaired (date): https://x.example/ "a title\nover two lines"',
    "entry 4: café \u201cquoted\u201d \\ back\\slash \r and a return",
    "",
]


def test_problem_log_gives_back_every_line_as_written():
    with ProblemLog() as log:
        for line in ODD_LINES:
            log(line)
        assert log.count == len(ODD_LINES)
        assert list(log) == ODD_LINES
        assert list(log) == ODD_LINES  # read back as often as asked


def test_problem_log_spills_to_disk_and_keeps_every_line():
    lines = [
        f"line {number}: skipped (already bookmarked as 1): https://e.example/{number}"
        for number in range(40_000)
    ]  # about 3 MB: beyond the log's 1 MiB in memory
    with ProblemLog() as log:
        for line in lines:
            log(line)
        assert list(log) == lines


@pytest.mark.parametrize("count", [0, 1, 3, 5000])
def test_report_json_is_what_msgspec_writes_for_the_report(count):
    problems = [f"{ODD_LINES[number % len(ODD_LINES)]} {number}" for number in range(count)]
    report = ImportReport(added=2, skipped=count, problems=problems, warnings=["read as cp1252"])
    chunks = list(report_json(report, iter(problems)))
    assert b"".join(chunks) == msgspec.json.encode(report)
    assert max(len(chunk) for chunk in chunks) < 70_000  # streamed in pieces, not built whole


def _duplicates(tmp_path, count: int = 6) -> str:
    lines = ['<DT><A HREF="https://dup.example/" ADD_DATE="1600000000">First</A>']
    lines += [f'<DT><A HREF="https://p{n}.example/">{n}</A>' for n in range(count)]
    lines.append('<DT><A HREF="https://dup.example/" ADD_DATE="1600000000">Second</A>')
    path = tmp_path / "dups.html"
    path.write_text("<DL>\n" + "\n".join(lines) + "\n</DL>\n", encoding="utf-8")
    return str(path)


def test_json_report_carries_every_line_and_verbose_lists_them_after_the_counts(marks, tmp_path):
    path = _duplicates(tmp_path)
    report = json.loads(marks("-o", "json", "import", "html", path).out)
    assert report["skipped"] == 1 and report["undated"] == 6
    assert len(report["problems"]) == 7
    assert any(line.startswith("line 9: same page as line 2") for line in report["problems"])
    again = marks("import", "html", path, "--verbose")
    lines = again.err.splitlines()
    assert lines[0] == "added 0, updated 0, skipped 8, invalid 0"
    listed = [line for line in lines if line.startswith("  line ")]
    assert len(listed) == 8 and listed[0].startswith("  line 2: skipped")
    quiet = marks("import", "html", path)
    assert "line 2" not in quiet.err and "skipped 8" in quiet.err


def test_update_merges_each_library_row_once_whatever_the_batches(library, tmp_path, monkeypatch):
    library.add("https://dup.example/", title="", tags=["old"])
    for batch in (2, 1000):  # the repeat in a later batch, then in the same batch
        monkeypatch.setattr(importing, "BATCH", batch)
        lines = ['<DT><A HREF="https://dup.example/" TAGS="one">One</A>']
        lines += [f'<DT><A HREF="https://q{batch}-{n}.example/">q</A>' for n in range(3)]
        lines.append(f'<DT><A HREF="https://dup.example/" TAGS="two{batch}">Two</A>')
        path = tmp_path / f"u{batch}.html"
        path.write_text("\n".join(lines), encoding="utf-8")
        report = transfer.import_file(library, "html", str(path), update=True)
        assert (report.added, report.updated, report.skipped) == (3, 1, 1)
        assert any("same page as an earlier entry" in line for line in report.problems)
    merged = library.find_by_url("https://dup.example/")
    assert merged.title == "One" and merged.tags == ["old", "one", "two1000", "two2"]
    store = library.store
    for index in importing.INDEXES:  # each row in each index once: no double delete or insert
        store.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
    assert [hit.bookmark.url for hit in library.search("two1000", fts=True)] == [merged.url]
    assert not store.one("SELECT name FROM sqlite_temp_schema WHERE type = 'table'")


def test_strict_names_the_first_entry_it_refuses(library, tmp_path):
    path = tmp_path / "s.html"
    path.write_text(
        '<DT><A HREF="https://invalid.example/" ADD_DATE="1600000000">fine</A>\n'
        '<DT><A HREF="notaurl">Bad</A>\n<DT><A HREF="also bad">Worse</A>\n',
        encoding="utf-8",
    )
    with pytest.raises(Invalid) as raised:
        transfer.import_file(library, "html", str(path), strict=True)
    assert "(first: line 2: invalid" in str(raised.value)
    assert library.count() == 0


@pytest.mark.parametrize("kept", [None, 65536])
def test_an_import_leaves_the_full_text_settings_as_they_were(library, tmp_path, kept):
    """The import fills the indexes with a larger FTS5 `hashsize`, which FTS5 keeps in the
    index's `_config` table: afterwards the table is as before (no row, or the library's own)."""
    store = library.store
    if kept is not None:
        for index in importing.INDEXES:
            store.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('hashsize', ?)", (kept,))

    def settings() -> dict[str, list[tuple]]:
        return {
            index: store.execute(f"SELECT k, v FROM {index}_config ORDER BY k").fetchall()
            for index in importing.INDEXES
        }

    before = settings()
    path = tmp_path / "h.html"
    path.write_text(
        "".join(f'<DT><A HREF="https://h{n}.example/">hashed{n}</A>\n' for n in range(3)),
        encoding="utf-8",
    )
    assert transfer.import_file(library, "html", str(path)).added == 3
    assert settings() == before
    assert ("hashsize", kept) in before["bookmarks_fts"] or kept is None
    assert [hit.bookmark.url for hit in library.search("hashed1", fts=True)] == [
        "https://h1.example/"
    ]
