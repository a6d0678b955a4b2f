"""`marks bookmark health` against a real local web server: every category, history, confirmation,
selection, per-host limits and hosts that never answer. Nothing touches the internet."""

import datetime as dt
import json

import pytest
import trustme

from marks import clock
from marks.health import Health, Options, Selection
from marks.library import Library
from marks.store import Store
from support.websites import Websites

FAST = ("--timeout", "1", "--retries", "0")


@pytest.fixture(scope="module")
def web():
    ca = trustme.CA()
    with Websites(hosts=3, slow_seconds=4, tls_cert=ca.issue_cert("127.0.0.1")) as sites:
        yield sites


def _add(marks, *urls):
    for url in urls:
        result = marks("bookmark", "add", url, "--title", "t", "--no-fetch")
        assert result.code == 0, result.err


def _json(marks, *args) -> dict[str, dict]:
    result = marks("--output", "json", "bookmark", "health", *args)
    assert result.code == 0, result.err
    return {item["url"]: item for item in json.loads(result.out)}


CASES = [
    ("/ok", "ok", 200, True),
    ("/redirect", "redirect", 200, True),
    ("/chain/3", "redirect", 200, True),
    ("/loop", "client_error", None, False),
    ("/status/404", "client_error", 404, False),
    ("/status/410", "client_error", 410, False),
    ("/status/500", "server_error", 500, False),
    ("/status/503", "server_error", 503, False),
    ("/status/401", "client_error", 401, True),
    ("/status/403", "client_error", 403, True),
    ("/status/429", "client_error", 429, True),
    ("/challenge", "blocked", 403, True),
    ("/nohead", "ok", 200, True),
    ("/doc.pdf", "ok", 200, True),
    ("/binary", "ok", 200, True),
    ("/huge", "ok", 200, True),
]


def test_every_category_with_status_and_reachable(marks, web):
    urls = [web.url(path) for path, *_ in CASES]
    _add(marks, *urls, web.url("/slow", 2), web.tls_url, web.closed_url, "http://nowhere.invalid/")
    found = _json(marks, *FAST)
    for (path, result, status, reachable), url in zip(CASES, urls, strict=True):
        assert (found[url]["result"], found[url]["status"], found[url]["reachable"]) == (
            result,
            status,
            reachable,
        ), path
    assert found[web.url("/redirect")]["final_url"] == web.url("/ok")
    assert "redirects" in found[web.url("/loop")]["detail"]
    assert found[web.url("/slow", 2)]["result"] == "timeout"
    assert found[web.tls_url]["result"] == "ssl_error"
    assert found[web.closed_url]["result"] == "connection_error"
    assert found["http://nowhere.invalid/"]["result"] == "dns"
    # HEAD refused with 405: the GET that followed decided.
    assert web.hits[("127.0.0.1", "/nohead")] == 2


def test_history_get_and_summary(marks, web):
    _add(marks, web.url("/ok"), web.url("/status/404"))
    first = marks("bookmark", "health", *FAST)
    assert first.code == 0, first.err
    assert "checked 2 of 2 link(s)" in first.out
    assert "client error" in first.out and "not yet confirmed: 1" in first.out
    got = marks("bookmark", "get", "2")
    assert "reachable: False" in got.out and "client_error 404" in got.out
    # A second run the same day skips both (results younger than a day)...
    again = marks("bookmark", "health", *FAST)
    assert "checked 0 of 0" in again.out and "skipped 2 checked less than 24 h ago" in again.out
    # ...unless forced, and every check is a history row.
    assert marks("bookmark", "health", "--force", *FAST).code == 0
    library = Library(Store(marks.db))
    rows = library.store.execute(
        "SELECT bookmark_id, result, status FROM health_checks ORDER BY id"
    ).fetchall()
    assert rows == [
        (1, "ok", 200),
        (2, "client_error", 404),
        (1, "ok", 200),
        (2, "client_error", 404),
    ] or sorted(rows) == sorted(
        [(1, "ok", 200), (2, "client_error", 404), (1, "ok", 200), (2, "client_error", 404)]
    )


def test_confirmed_only_after_failures_hours_apart(db_path, web):
    moment = [dt.datetime(2026, 1, 1, 8, tzinfo=dt.UTC)]
    store = Store(db_path)
    library = Library(store, now=lambda: moment[0])
    bookmark = library.add(web.url("/status/410"))
    checker = Health(library, Options(timeout=2, retries=0, confirm_hours=4))
    first = checker.run(Selection(ids=(bookmark.id,)))
    assert first.unconfirmed == [bookmark.id] and not first.confirmed
    moment[0] += dt.timedelta(hours=1)
    soon = checker.run(Selection(ids=(bookmark.id,)))
    assert soon.unconfirmed == [bookmark.id]  # an hour apart is not enough
    moment[0] += dt.timedelta(hours=4)
    later = checker.run(Selection(ids=(bookmark.id,)))
    assert later.confirmed == [bookmark.id]
    last = checker.last(bookmark.id)
    assert last.confirmed and last.failing_since == dt.datetime(2026, 1, 1, 8, tzinfo=dt.UTC)
    assert len(checker.history(bookmark.id)) == 3
    store.close()


def test_a_success_resets_the_failure_run(db_path, web):
    moment = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    library = Library(Store(db_path), now=lambda: moment[0])
    bookmark = library.add(web.url("/status/500"))
    checker = Health(library, Options(timeout=2, retries=0))
    checker.run(Selection(ids=(bookmark.id,)))
    library.update(bookmark.id, url=web.url("/ok"))
    moment[0] += dt.timedelta(hours=5)
    checker.run(Selection(ids=(bookmark.id,)))
    library.update(bookmark.id, url=web.url("/status/502"))
    moment[0] += dt.timedelta(hours=5)
    summary = checker.run(Selection(ids=(bookmark.id,)))
    assert summary.unconfirmed == [bookmark.id]  # a new run of failures starts now
    assert checker.last(bookmark.id).failing_since == moment[0]


def test_selection_broken_unchecked_ids_query_and_dry_run(marks, web):
    _add(marks, web.url("/ok"), web.url("/status/404"), web.url("/page/x"), web.url("/redirect"))
    dry = _json(marks, "--dry-run", *FAST)
    assert len(dry) == 4
    assert marks("bookmark", "get", "1").out.count("reachable: \n") == 1  # nothing stored
    assert set(_json(marks, "1", "2", *FAST)) == {web.url("/ok"), web.url("/status/404")}
    assert set(_json(marks, "--broken", *FAST)) == {web.url("/status/404")}
    assert set(_json(marks, "--unchecked", *FAST)) == {web.url("/page/x"), web.url("/redirect")}
    assert set(_json(marks, "--query", "url ~ page", "--force", *FAST)) == {web.url("/page/x")}
    assert _json(marks, "--query", "url ~ page", *FAST) == {}  # checked today already
    missing = marks("bookmark", "health", "99")
    assert missing.code == 1 and missing.err == "marks: no bookmark with id 99\n"
    bad = marks("bookmark", "health", "--query", "visits >")
    assert bad.code == 1 and bad.err.startswith("marks: ") and len(bad.err.splitlines()) == 1


def test_retries_transient_errors(marks, web):
    _add(marks, web.url("/flaky", 3))
    found = _json(marks, "--timeout", "2", "--retries", "2")
    check = found[web.url("/flaky", 3)]
    assert check["result"] == "ok" and check["attempts"] == 2
    # A 404 is never retried.
    _add(marks, web.url("/status/404", 3))
    _json(marks, "2", "--retries", "3")
    assert web.hits[("127.0.0.3", "/status/404")] == 2  # HEAD, then the GET that confirms


def test_per_host_limit_is_respected(db_path, web):
    library = Library(Store(db_path))
    for number in range(24):
        library.add(web.url(f"/page/p{number}?host=1"))
        library.add(web.url(f"/page/p{number}?host=2", host=2))
    web.peak.clear()
    summary = Health(library, Options(concurrency=20, per_host=3, timeout=5)).run(Selection())
    assert summary.checked == 48 and summary.by_result == {"ok": 48}
    assert web.peak["127.0.0.1"] <= 3 and web.peak["127.0.0.2"] <= 3


def test_a_host_that_never_answers_costs_one_timeout(db_path, web):
    library = Library(Store(db_path))
    for number in range(12):
        library.add(web.url(f"/slow?n={number}", host=3))
    library.add(web.url("/ok", host=2))
    checker = Health(library, Options(concurrency=20, per_host=2, timeout=0.5, retries=2))
    summary = checker.run(Selection())
    assert summary.by_result == {"timeout": 12, "ok": 1}
    assert summary.hosts_down == {f"127.0.0.3:{web.port}": 10}
    assert summary.seconds < 0.5 * 4  # two requests at a time; not 12 timeouts, nor retries
    skipped = [c for c in checker.history(13)] + [
        checker.last(bookmark_id) for bookmark_id in range(1, 13)
    ]
    assert any("not tried" in c.detail for c in skipped)


def test_non_http_links_are_skipped_and_counted(marks, web):
    _add(marks, "ftp://files.example/x", web.url("/ok"))
    result = marks("bookmark", "health", *FAST)
    assert "checked 1 of 1" in result.out and "skipped 1 that are not http(s)" in result.out


def test_urls_and_csv_outputs(marks, web):
    _add(marks, web.url("/ok"), web.url("/status/404"))
    urls = marks("--output", "urls", "bookmark", "health", *FAST)
    assert urls.out == web.url("/status/404") + "\n"
    rows = marks("--output", "csv", "bookmark", "health", "--force", *FAST).out.splitlines()
    assert rows[0].startswith("id,url,result,status") and len(rows) == 3


def test_config_keys_set_the_defaults(marks, web):
    assert marks("config", "set", "health_timeout", "1").code == 0
    assert marks("config", "set", "health_retries", "0").code == 0
    _add(marks, web.url("/slow?config", 2))
    found = _json(marks)
    assert found[web.url("/slow?config", 2)]["result"] == "timeout"
    assert found[web.url("/slow?config", 2)]["elapsed_ms"] < 3500


def test_shell_stat_and_broken_show_the_last_check(marks, web):
    _add(marks, web.url("/ok"), web.url("/status/404"))
    assert marks("bookmark", "health", *FAST).code == 0
    listing = marks.process("shell", "-c", "ls /broken")
    assert "2" in listing.out and "not yet confirmed" in listing.out
    assert "1 " not in listing.out.split("not yet")[0].splitlines()[0][:8]
    stat = marks.process("shell", "-c", "stat /bookmarks/2")
    assert "client_error 404" in stat.out and "not yet confirmed" in stat.out


def test_the_shell_confirms_by_the_users_rule(marks, web):
    # With `health_confirm_hours` 0 one failure is proof enough: the CLI says so, and the shell
    # (which once used the default 4 hours whatever the config said) must agree.
    assert marks("config", "set", "health_confirm_hours", "0").code == 0
    _add(marks, web.url("/status/404"))
    check = marks("bookmark", "health", *FAST)
    assert check.code == 3 and "not yet confirmed" not in check.out + check.err
    listing = marks.process("shell", "-c", "ls /broken")
    assert "1" in listing.out and "not yet confirmed" not in listing.out
    stat = marks.process("shell", "-c", "stat /bookmarks/1")
    assert "client_error 404" in stat.out and "not yet confirmed" not in stat.out


def test_history_is_removed_with_its_bookmark(db_path, web):
    library = Library(Store(db_path))
    bookmark = library.add(web.url("/ok"))
    Health(library, Options(timeout=2)).run(Selection())
    library.delete([bookmark.id])
    assert library.store.value("SELECT count(*) FROM health_checks") == 0
    assert clock.now()  # the library is still usable


def test_one_slow_page_does_not_condemn_a_server_that_answers(db_path, web):
    library = Library(Store(db_path))
    library.add(web.url("/ok?first", host=2))
    library.add(web.url("/slow?alone", host=2))
    for number in range(6):
        library.add(web.url(f"/page/after{number}", host=2))
    checker = Health(library, Options(concurrency=1, per_host=1, timeout=0.5, retries=1))
    summary = checker.run(Selection())
    assert summary.by_result == {"ok": 7, "timeout": 1} and summary.hosts_down == {}
