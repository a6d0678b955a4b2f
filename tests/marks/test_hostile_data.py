"""Hostile data in what marks reads (issue 25, item 8): files and bodies built to exhaust the
decoder, the memory or the report, and the library file's permissions."""

import json
import os
import socket
import stat
from pathlib import Path

DEEP = 100_000  # far past any decoder's recursion limit


def test_deeply_nested_json_import_is_one_line_and_exit_1(marks, tmp_path):
    for name, text in (
        ("array.json", "[" * DEEP + "]" * DEEP),
        ("object.json", '{"bookmarks": [' + '{"a":' * DEEP + "1" + "}" * DEEP + "]}"),
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


# --- the WebSocket upgrade ---------------------------------------------------------------------


def _upgrade(served, path: str = "/", host: str | None = None, **options):
    """Try a real WebSocket handshake (to `host`, a name rebound to the server); (status,
    body) of the refusal, or (101, b"")."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    port = int(served.url.rsplit(":", 1)[1])
    url = f"ws://{host or '127.0.0.1'}:{port}{path}"
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        with connect(url, sock=sock, open_timeout=20, **options):
            return 101, b""
    except InvalidStatus as refused:
        return refused.response.status_code, refused.response.body


def test_a_websocket_from_a_page_elsewhere_is_refused_like_http(served):
    status, body = _upgrade(served, "/", origin="http://evil.example")
    assert status == 403
    assert json.loads(body) == {
        "error": "Forbidden",
        "details": "cross-site request without a token",
    }
    status, body = _upgrade(served, "/static/app.js", origin="http://127.0.0.1:1")
    assert status == 403 and json.loads(body)["details"] == "cross-site request without a token"


def test_a_websocket_with_a_rebound_host_is_refused_like_http(served):
    status, body = _upgrade(served, "/", host="evil.example")
    assert status == 403
    assert json.loads(body)["details"] == "unknown Host (DNS-rebinding guard)"


def test_a_websocket_from_the_server_itself_passes_the_guard(served):
    """The guard lets its own origin by (marks has no socket route: the app then says no)."""
    status, body = _upgrade(served, "/", origin=served.url)
    assert status == 403 and b"DNS-rebinding" not in body and b"cross-site" not in body


# --- the size of what an import keeps and reports --------------------------------------------


def test_overlong_fields_are_capped_counted_and_listed(marks, tmp_path):
    from marks.importchecks import MAX_DESCRIPTION, MAX_TAG, MAX_TITLE, MAX_URL

    entries = [
        {"url": "https://title.example/", "title": "t" * 5_000_000},
        {"url": "https://description.example/", "description": "d" * (MAX_DESCRIPTION + 1)},
        {"url": "https://tag.example/", "tags": ["ok", "x" * (MAX_TAG + 1)]},
        {"url": "https://url.example/" + "u" * MAX_URL, "title": "long URL"},
        {"url": "https://fine.example/", "title": "t" * MAX_TITLE, "tags": ["y" * MAX_TAG]},
    ]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(entries))
    result = marks("import", "json", str(path), "--verbose")
    assert result.code == 0, result
    assert "added 4, updated 0, skipped 0, invalid 1" in result.err
    assert "3 repaired" in result.err
    assert "title of 5000000 characters cut to 4096" in result.err
    assert f"description of {MAX_DESCRIPTION + 1} characters cut to {MAX_DESCRIPTION}" in result.err
    assert f"tag of {MAX_TAG + 1} characters dropped (at most {MAX_TAG})" in result.err
    assert f"URL of {MAX_URL + 20} characters (at most {MAX_URL} kept)" in result.err
    assert all(len(line) <= 1002 for line in result.err.splitlines())  # lines quote, capped
    listed = {b["url"]: b for b in json.loads(marks("-o", "json", "bookmark", "list").out)}
    assert len(listed["https://title.example/"]["title"]) == MAX_TITLE
    assert len(listed["https://description.example/"]["description"]) == MAX_DESCRIPTION
    assert listed["https://tag.example/"]["tags"] == ["ok"]
    assert listed["https://fine.example/"]["tags"] == ["y" * MAX_TAG]  # at the cap: kept whole
    assert len(listed["https://fine.example/"]["title"]) == MAX_TITLE


def test_a_long_report_holds_1000_lines_counts_the_rest_and_verbose_saves_all(
    marks, tmp_path, db_path
):
    count = 2500
    path = tmp_path / "skips.txt"
    path.write_text("".join(f"https://same.example/{n}\n" for n in range(count)))
    assert marks("import", "text", str(path)).code == 0
    again = marks("-o", "json", "import", "text", str(path))  # every line skipped
    report = json.loads(again.out)
    assert report["skipped"] == count
    assert len(report["problems"]) == 1000 and report["problems_omitted"] == count - 1000
    verbose = marks("import", "text", str(path), "--verbose")
    lines = verbose.err.splitlines()
    assert sum(": skipped (already bookmarked as " in line for line in lines) == 1000
    tail = lines[-1]
    assert tail.startswith(f"  ... and {count - 1000} more: all {count} lines are in ")
    saved = tail.rsplit(" are in ", 1)[1]
    assert saved.startswith(str(tmp_path / "state"))
    written = Path(saved).read_text(encoding="utf-8").splitlines()
    assert len(written) == count and written[-1].endswith(f"https://same.example/{count - 1}")
    assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600


def test_the_http_import_answer_holds_1000_lines_and_counts_the_rest(served):
    body = "".join(f"https://same.example/{n}\n" for n in range(1500)).encode()
    assert served.http.post("/import/text", content=body).json()["added"] == 1500
    report = served.http.post("/import/text", content=body).json()
    assert report["skipped"] == 1500
    assert len(report["problems"]) == 1000 and report["problems_omitted"] == 500


# --- JSON objects are streamed like arrays ----------------------------------------------------


_PEAK = """
import os, sys
devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], dict(os.environ), file_actions=devnull)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def _peak_mb(*argv: str) -> float:
    """`marks` run alone; its own peak resident memory (the kernel's, reaped with wait4). It is
    started by a small process: a child's peak starts from its parent's size (it survives exec),
    and this test process is larger than the imports measured."""
    import subprocess
    import sys

    marks = str(Path(sys.executable).with_name("marks"))
    done = subprocess.run(
        [sys.executable, "-S", "-c", _PEAK, marks, *argv],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    code, peak = done.stdout.split()
    assert code == "0", argv
    return int(peak) / 1024


_WRITE_FILES = """
import json, sys
from pathlib import Path
where, count, pad = Path(sys.argv[1]), 60_000, "p" * 460
items = [{"url": f"https://site{n % 97}.example/{n}", "title": f"{pad} {n}"} for n in range(count)]
(where / "array.json").write_text(json.dumps(items))
(where / "page.json").write_text(json.dumps({"count": count, "bookmarks": items}))
with (where / "Bookmarks").open("w") as out:
    out.write('{"checksum": "x", "roots": {"bookmark_bar": {"children": [')
    for folder in range(count // 100):
        out.write("," if folder else "")
        out.write('{"children": [')
        out.write(",".join(
            json.dumps({"name": f"{pad} {n}", "type": "url", "url": items[n]["url"]})
            for n in range(folder * 100, folder * 100 + 100)
        ))
        out.write(f'], "name": "folder {folder}", "type": "folder"}}')
    out.write('], "name": "Bookmarks bar", "type": "folder"}}, "version": 1}')
"""


def test_json_objects_are_streamed_with_the_peak_of_an_array(tmp_path, monkeypatch):
    """A Chrome file of 30 MB (folders name themselves after their children, so it takes two
    passes) and a `{"bookmarks": [...]}` page peak close to the same bookmarks as an array.
    The files are written by another process, to keep this one small."""
    import subprocess
    import sys

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    subprocess.run([sys.executable, "-c", _WRITE_FILES, str(tmp_path)], check=True, timeout=300)
    assert (tmp_path / "Bookmarks").stat().st_size > 30_000_000
    peaks = {
        name: _peak_mb("--db", str(tmp_path / f"{name}.db"), "import", "json", str(tmp_path / name))
        for name in ("array.json", "page.json", "Bookmarks")
    }
    print(f"peak MB: {peaks}")
    for name in ("page.json", "Bookmarks"):
        assert peaks[name] < peaks["array.json"] + 15, peaks
    from marks.library import Library
    from marks.store import Store

    store = Store(tmp_path / "Bookmarks.db")
    try:
        found = Library(store).get(1)
        assert found.url == "https://site0.example/0" and found.tags == ["folder 0"], found
        assert Library(store).get(60_000).tags == ["folder 599"]
    finally:
        store.close()
