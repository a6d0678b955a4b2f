"""Hostile data in what marks reads (issue 25, item 8): files and bodies built to exhaust the
decoder, the memory or the report, and the library file's permissions."""

import json
import stat

DEEP = 100_000  # far past any decoder's recursion limit


def test_deeply_nested_json_import_is_one_line_and_exit_1(marks, tmp_path):
    for name, text in (
        ("array.json", "[" * DEEP + "]" * DEEP),
        ("object.json", '{"a":' * DEEP + "1" + "}" * DEEP),
        ("item.json", '[{"url": "https://a.example/", "x": ' + "[" * DEEP + "]" * DEEP + "}]"),
    ):
        path = tmp_path / name
        path.write_text(text)
        result = marks("import", "json", str(path))
        assert result.code == 1, (name, result)
        assert result.err.strip().count("\n") == 0 and "nested too deeply" in result.err, name
        assert "Traceback" not in result.err
    assert marks("-o", "json", "bookmark", "list").out.strip() in ("[]", '{"items": []}', "")


def test_deeply_nested_chrome_folders_are_one_line(marks, tmp_path):
    # Deep enough for Python's own walk of the folders, not only the decoder, to run out.
    leaf = '{"type": "url", "name": "x", "url": "https://deep.example/"}'
    opening, closing = '{"type": "folder", "name": "f", "children": [', "]}"
    path = tmp_path / "Bookmarks"
    path.write_text('{"roots": {"bookmark_bar": ' + opening * 5000 + leaf + closing * 5000 + "}}")
    result = marks("import", "json", str(path))
    assert result.code == 1 and "nested too deeply" in result.err, result
    assert "Traceback" not in result.err


def test_deeply_nested_bodies_are_422_with_the_json_error(served):
    upload = served.http.post("/import/json", content="[" * DEEP + "]" * DEEP)
    assert upload.status_code == 422, upload.text
    assert "nested too deeply" in upload.json()["details"]
    assert served.http.get("/bookmarks").json()["items"] == []


def test_the_library_file_and_its_wal_are_created_0600(db_path):
    from marks.store import Store

    store = Store(db_path)  # a connection held open keeps -wal and -shm on disk
    try:
        store.execute("INSERT INTO tags (name) VALUES ('x')")
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE((db_path.parent / (db_path.name + suffix)).stat().st_mode)
            assert mode == 0o600, (suffix, oct(mode))
    finally:
        store.close()


def test_every_json_body_decoder_refuses_deep_nesting_as_422():
    """The REST bodies' one decoder: typed bodies mostly fail before the depth does, an untyped
    one (a plugin's) reaches it."""
    from typing import Any

    import pytest

    from marks.server.endpoint import decode
    from servekit import HTTPError

    with pytest.raises(HTTPError) as refused:
        decode(b"[" * DEEP + b"]" * DEEP, Any)
    assert str(refused.value) == "422 Invalid: the body is nested too deeply"
