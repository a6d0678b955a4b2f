"""Tags are one tag whatever their case, in every script (Unicode case folding)."""

import apsw
import pytest

from marks.library import Library
from marks.store import Store


def test_tags_differing_in_case_are_one_tag_in_any_script(library):
    first = library.add("https://a.example", tags=["Äpfel", "ΣΟΦΙΑ", "Straße"])
    second = library.add("https://b.example", tags=["äpfel", "σοφια", "STRASSE"])
    assert set(first.tags) == {"Äpfel", "ΣΟΦΙΑ", "Straße"}
    assert set(second.tags) == {"Äpfel", "ΣΟΦΙΑ", "Straße"}  # the first spelling is kept
    assert [c.name for c in library.tag_counts()] == sorted(
        ["Äpfel", "ΣΟΦΙΑ", "Straße"], key=str.casefold
    )
    assert {c.count for c in library.tag_counts()} == {2}
    assert [b.id for b in library.with_tags(["ÄPFEL"])] == [2, 1]
    assert library.tag_remove("äPFEL", [1]) == 1
    assert library.update(2, tags=["äpfel", "ÄPFEL"]).tags == ["Äpfel"]


def test_rename_changes_the_case_and_finds_tags_by_any_case(library):
    library.add("https://a.example", tags=["Äpfel/Grün"])
    library.tag_rename("äPFEL", "Obst")
    assert library.get(1).tags == ["Obst/Grün"]
    library.tag_rename("obst", "OBST")
    assert library.get(1).tags == ["OBST/Grün"]


def _before_tag_keys(path) -> apsw.Connection:
    """A database as the schema before tag keys left it (every migration up to that one)."""
    from marks import schema

    old_version = next(
        number for number, sql in enumerate(schema.MIGRATIONS) if "ADD COLUMN key" in sql
    )
    db = apsw.Connection(str(path))
    for sql in schema.MIGRATIONS[:old_version]:
        db.execute(sql)
    db.execute(f"PRAGMA user_version = {old_version}")
    return db


def test_migration_merges_tags_that_collide_and_reports_them(tmp_path):
    path = tmp_path / "old.db"
    db = _before_tag_keys(path)
    db.execute(
        "INSERT INTO bookmarks (url, url_key, added) VALUES "
        "('https://a.example', 'a', '2026-01-01T00:00:00Z'), "
        "('https://b.example', 'b', '2026-01-02T00:00:00Z')"
    )
    db.execute("INSERT INTO tags (name) VALUES ('Äpfel'), ('äpfel'), ('ÄPFEL/rot'), ('x')")
    db.execute("INSERT INTO bookmark_tags VALUES (1, 1), (2, 2), (2, 4), (1, 3)")
    db.close()

    store = Store(path)
    assert store.notices == [
        "tag 'äpfel' merged into 'Äpfel' (1 bookmark(s)): tags ignore case now"
    ]
    library = Library(store)
    assert set(library.get(1).tags) == {"ÄPFEL/rot", "Äpfel"}
    assert set(library.get(2).tags) == {"x", "Äpfel"}
    assert [b.id for b in library.with_tags(["äpfel"])] == [2, 1]
    store.close()
    assert Store(path).notices == []  # reported once


def test_migration_report_reaches_the_cli(marks, db_path):
    db = _before_tag_keys(db_path)
    db.execute(
        "INSERT INTO bookmarks (url, url_key, added) "
        "VALUES ('https://a.example/', 'https://a.example/', '2026-01-01T00:00:00Z')"
    )
    db.execute("INSERT INTO tags (name) VALUES ('Äpfel'), ('äpfel')")  # NOCASE let both in
    db.execute("INSERT INTO bookmark_tags VALUES (1, 1), (1, 2)")
    db.close()
    result = marks("bookmark", "list")
    assert result.code == 0
    assert "marks: tag 'äpfel' merged into 'Äpfel' (1 bookmark(s)): tags ignore case now" in (
        result.err
    )


def test_the_database_itself_keeps_tags_unique_by_case_fold(library):
    library.add("https://a.example", tags=["Äpfel"])
    with pytest.raises(apsw.ConstraintError):  # a second spelling cannot get in
        library.store.execute("INSERT INTO tags (name) VALUES ('äPFEL')")
    assert library.store.value("SELECT key FROM tags") == "äpfel"
