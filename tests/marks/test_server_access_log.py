"""`marks serve` writes an access log: a line per request on stderr in the combined log format
(issue 26, item 4), with what a client sends made unable to forge a line, no secrets, and a way
to turn it off (`--no-access-log`, config `server_access_log`)."""

import re

import httpx

from support.marksserve import Served, start_marks
from support.servers import wait_until

LINE = re.compile(
    r"^(?P<host>\S+) - - \[(?P<time>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] "
    r'"(?P<request>[^"]*)" (?P<status>\d{3}) (?P<size>\d+|-) "(?P<referer>[^"]*)" '
    r'"(?P<agent>[^"]*)"$'
)


def _log(served: Served) -> list[re.Match[str]]:
    return [m for line in served.process.lines if (m := LINE.match(line.rstrip("\n")))]


def test_a_line_per_request_in_the_combined_format(tmp_path):
    served = Served(
        start_marks(tmp_path / "library.db", tmp_path), tmp_path / "library.db", tmp_path
    )
    try:
        served.add("https://a.example/", title="A")
        listed = served.http.get(
            "/bookmarks?limit=5&tag=a%20b",
            headers={
                "User-Agent": 'evil" 200 1 "-" "x\\',
                "Referer": "https://ref.example/",
                **served.authed(),
            },
        )
        assert listed.status_code == 200
        assert served.http.get("/no/such/page").status_code == 404
        refused = httpx.get(served.url + "/bookmarks", headers={"Host": "evil.example"})
        assert refused.status_code in (400, 403, 421)
        assert wait_until(lambda: len(_log(served)) >= 4)
        lines = _log(served)
        requests = [(m["request"], m["status"]) for m in lines]
        assert ("POST /bookmarks HTTP/1.1", "201") in requests
        assert ("GET /bookmarks?limit=5&tag=a%20b HTTP/1.1", "200") in requests
        assert ("GET /no/such/page HTTP/1.1", "404") in requests
        assert ("GET /bookmarks HTTP/1.1", str(refused.status_code)) in requests  # refusals too
        listing = next(m for m in lines if m["request"].startswith("GET /bookmarks?"))
        assert listing["host"] == "127.0.0.1" and int(listing["size"]) == len(listed.content)
        assert listing["referer"] == "https://ref.example/"
        # The client's quotes and backslash cannot end the field and forge the rest of a line.
        assert listing["agent"] == "evil\\x22 200 1 \\x22-\\x22 \\x22x\\x5c"
        assert not any(served.token in m.group() for m in lines)  # the Authorization header
    finally:
        served.close()


def test_the_access_log_can_be_turned_off(tmp_path):
    db = tmp_path / "library.db"
    off = Served(start_marks(db, tmp_path, "--no-access-log"), db, tmp_path)
    try:
        assert off.http.get("/bookmarks").status_code == 200
        assert off.http.get("/openapi.json").status_code == 200
    finally:
        off.close()  # its whole output read
    assert not _log(off) and "listening on" in off.process.output
    config = tmp_path / "config" / "marks"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("server_access_log = false\n")
    quiet = Served(start_marks(db, tmp_path), db, tmp_path)
    try:
        assert quiet.http.get("/bookmarks").status_code == 200
    finally:
        quiet.close()
    assert not _log(quiet)
    loud = Served(start_marks(db, tmp_path, "--access-log"), db, tmp_path)  # the flag wins
    try:
        assert loud.http.get("/bookmarks").status_code == 200
        assert wait_until(lambda: len(_log(loud)) == 1)
    finally:
        loud.close()
