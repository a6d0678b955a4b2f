"""`marks bookmark health --wayback` (issue 25, item 4): archived copies of confirmed-broken links
from the Wayback Machine's availability API, played by a local server answering its documented
JSON (config `wayback_api`); nothing leaves the machine."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest


class Archive:
    """`/gone/...` is a dead page (404); `/available` answers as the API does: a capture for
    URLs with `kept` in them, a hostile `javascript:` capture for `hostile`, none otherwise."""

    def __init__(self) -> None:
        archive = self
        self.asked: list[dict[str, list[str]]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == "/available":
                    query = parse_qs(parts.query)
                    archive.asked.append(query)
                    url = query["url"][0]
                    closest = {
                        "available": True,
                        "url": f"http://web.archive.org/web/20200102030405/{url}",
                        "timestamp": "20200102030405",
                        "status": "200",
                    }
                    if "hostile" in url:
                        closest["url"] = "javascript:alert(1)"
                    body = json.dumps(
                        {"url": url, "archived_snapshots": {"closest": closest}}
                        if "kept" in url or "hostile" in url
                        else {"url": url, "archived_snapshots": {}}
                    ).encode()
                    status = 200
                else:
                    body, status = b"gone", 404
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def archive(marks):
    served = Archive()
    for key, value in (
        ("health_confirm_hours", "0"),  # the first failure confirms: no waiting hours in a test
        ("health_retries", "0"),
        ("health_timeout", "5"),
        ("wayback_api", served.url + "/available"),
    ):
        assert marks("config", "set", key, value).code == 0
    yield served
    served.close()


def _import(marks, tmp_path, archive) -> dict[str, int]:
    entries = [
        {"url": f"{archive.url}/gone/kept", "added": "2019-12-30T10:00:00Z"},
        {"url": f"{archive.url}/gone/never", "added": "2018-05-06T10:00:00Z"},
        {"url": f"{archive.url}/gone/hostile", "added": "2017-01-01T00:00:00Z"},
    ]
    path = tmp_path / "dead.json"
    path.write_text(json.dumps(entries))
    assert marks("import", "json", str(path)).code == 0
    listed = json.loads(marks("-o", "json", "bookmark", "list").out)
    return {b["url"].rsplit("/", 1)[1]: b["id"] for b in listed}


def test_health_wayback_stores_the_closest_capture_of_confirmed_broken_links(
    marks, tmp_path, archive
):
    ids = _import(marks, tmp_path, archive)
    result = marks("bookmark", "health", "--wayback")
    assert result.code == 3, result  # 3: a checked link is confirmed broken
    assert "archived copies: 1 of 3 confirmed-broken link(s)" in result.out
    assert f"{ids['kept']}: dead; archived copy from 2020-01-02: http://web.archive.org/" in (
        result.out
    )
    asked = {q["url"][0].rsplit("/", 1)[1]: q["timestamp"][0] for q in archive.asked}
    assert asked == {"kept": "20191230", "never": "20180506", "hostile": "20170101"}

    kept = json.loads(marks("-o", "json", "bookmark", "get", str(ids["kept"])).out)[0]
    assert (
        kept["archived_url"] == f"http://web.archive.org/web/20200102030405/{archive.url}/gone/kept"
    )
    assert kept["archived_at"] == "2020-01-02T03:04:05Z"
    shown = marks("bookmark", "get", str(ids["kept"])).out
    assert "dead; archived copy from 2020-01-02" in shown
    for name in ("never", "hostile"):  # none found; a `javascript:` answer is not kept
        other = json.loads(marks("-o", "json", "bookmark", "get", str(ids[name])).out)[0]
        assert other["archived_url"] is None and other["archived_at"] is None

    exported = tmp_path / "export.json"
    assert marks("export", "json", "--file", str(exported)).code == 0
    assert any(b.get("archived_url") for b in json.loads(exported.read_text()))
    # CSV carries the archived copy too, and marks' own CSV import reads it back.
    as_csv = tmp_path / "export.csv"
    assert marks("export", "csv", "--file", str(as_csv)).code == 0
    copy = tmp_path / "copy.db"
    assert marks("--db", str(copy), "import", "csv", str(as_csv)).code == 0
    back = json.loads(marks("--db", str(copy), "-o", "json", "bookmark", "list").out)
    archived = {(b["archived_url"], b["archived_at"]) for b in back if b["archived_url"]}
    assert archived == {(kept["archived_url"], kept["archived_at"])}


def test_wayback_is_off_unless_asked_and_config_turns_it_on(marks, tmp_path, archive):
    _import(marks, tmp_path, archive)
    assert marks("bookmark", "health").code == 3
    assert archive.asked == []  # off by default: the API is never asked
    assert marks("config", "set", "health_wayback", "true").code == 0
    again = marks("bookmark", "health", "--broken")
    assert again.code == 3 and "archived copies: 1 of 3" in again.out
    assert len(archive.asked) == 3


def test_an_unreadable_api_answer_is_said_and_stores_nothing(marks, tmp_path, archive):
    ids = _import(marks, tmp_path, archive)
    assert marks("config", "set", "wayback_api", archive.url + "/gone/api").code == 0
    result = marks("bookmark", "health", "--wayback")
    assert result.code == 3
    assert "archived copies: 0 of 3" in result.out and "the API answered HTTP 404" in result.out
    got = json.loads(marks("-o", "json", "bookmark", "get", str(ids["kept"])).out)[0]
    assert got["archived_url"] is None


def test_marks_serve_health_checks_look_up_archived_copies_when_configured(tmp_path):
    import os
    import subprocess

    from support.marksrun import MARKS
    from support.marksserve import Served, start_marks
    from support.servers import wait_until

    served_archive = Archive()
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    for key, value in (
        ("health_confirm_hours", "0"),
        ("health_retries", "0"),
        ("health_wayback", "true"),
        ("wayback_api", served_archive.url + "/available"),
    ):
        subprocess.run([MARKS, "config", "set", key, value], env=env, check=True, timeout=60)
    db = tmp_path / "library.db"
    served = Served(start_marks(db, tmp_path), db, tmp_path)
    try:
        kept = served.add(f"{served_archive.url}/gone/kept", tags=["dead"])["id"]
        served.add(f"{served_archive.url}/gone/never", tags=["dead"])
        started = served.http.post("/bookmarks/health", json={"query": "tag:dead"})
        assert started.status_code == 202, started.text
        report: dict = {}

        def done() -> bool:
            report.update(served.http.get(f"/bookmarks/health/{started.json()['id']}").json())
            return report["state"] != "running"

        assert wait_until(done, timeout=60, interval=0.1), report
        assert report["state"] == "done" and report["confirmed"] == 2
        assert report["archived"] == 1
        got = served.http.get(f"/bookmarks/{kept}").json()
        assert got["archived_url"].startswith("http://web.archive.org/web/20200102030405/")
        assert got["archived_at"] == "2020-01-02T03:04:05Z"
    finally:
        served.close()
        served_archive.close()
