"""`/bookmarks/health`, `/bookmarks/{id}/content` and `/plugins` on a live `marks serve`.

Links point at a local multi-host test server (support/websites.py) and at `.invalid` names,
so nothing here touches the internet.
"""

import os
import subprocess

import pytest

from support.jsonerrors import assert_error
from support.marksrun import MARKS
from support.marksserve import Served, start_marks
from support.servers import wait_until
from support.websites import Websites


@pytest.fixture(scope="module")
def web():
    with Websites(hosts=2, slow_seconds=5) as sites:
        yield sites


def _home_env(home) -> dict[str, str]:
    return {
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def marks_cli(home, *args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [MARKS, *args],
        env={**os.environ, **_home_env(home), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def configure(home, **values) -> None:
    for key, value in values.items():
        done = subprocess.run(
            [MARKS, "config", "set", key, str(value)],
            env={**os.environ, **_home_env(home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr


def _server(home, timeout: int):
    configure(home, health_timeout=timeout, health_retries=0)
    return Served(start_marks(home / "library.db", home), home / "library.db", home)


@pytest.fixture
def fast(tmp_path):
    """A server whose checks give up quickly (1 s a link, no retries)."""
    server = _server(tmp_path, 1)
    yield server
    server.close()


@pytest.fixture
def patient(tmp_path):
    """Checks give up after 2 s: a check of /slow (5 s) stays running long enough to be seen."""
    server = _server(tmp_path, 2)
    yield server
    server.close()


def finished(served: Served, check_id: str) -> dict:
    """Poll the check until it is done (the condition, not a fixed wait)."""
    answers: list[dict] = []

    def done() -> bool:
        answer = served.http.get(f"/bookmarks/health/{check_id}")
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
        return answers[-1]["state"] != "running"

    assert wait_until(done, timeout=60, interval=0.1), answers[-1]
    return answers[-1]


CASES = {
    "/ok": ("ok", 200, True),
    "/redirect": ("redirect", 200, True),
    "/status/404": ("client_error", 404, False),
    "/status/500": ("server_error", 500, False),
    "/challenge": ("blocked", 403, True),
}


def test_a_batch_check_runs_in_the_background_and_reports_each_link(fast, web):
    ids = {path: fast.add(web.url(path), title=path, tags=["batch"])["id"] for path in CASES}
    ids["closed"] = fast.add(web.closed_url, title="closed", tags=["batch"])["id"]
    ids["dns"] = fast.add("http://nowhere.invalid/", title="dns", tags=["batch"])["id"]
    other = fast.add(web.url("/ok", 2), title="not in the batch")["id"]

    started = fast.http.post("/bookmarks/health", json={"query": "tag:batch"})
    assert started.status_code == 202, started.text
    check = started.json()
    assert check["total"] == 7 and check["state"] in ("running", "done")
    report = finished(fast, check["id"])
    assert report["state"] == "done" and report["done"] == 7 and report["error"] is None
    assert report["by_result"] == {
        "ok": 1, "redirect": 1, "client_error": 1, "server_error": 1, "blocked": 1,
        "connection_error": 1, "dns": 1,
    }  # fmt: skip
    assert report["broken"] == 4 and report["confirmed"] == 0
    results = {item["id"]: item for item in report["results"]}
    assert set(results) == set(ids.values())  # `other` was not selected
    for path, (result, status, reachable) in CASES.items():
        item = results[ids[path]]
        assert (item["result"], item["status"], item["reachable"]) == (result, status, reachable)
        assert item["confirmed"] is False
    assert results[ids["/redirect"]]["final_url"] == web.url("/ok")
    assert results[ids["dns"]]["result"] == "dns"

    # The results were stored as the CLI stores them: the list filters and the history see them.
    broken = fast.http.get("/bookmarks", params={"query": "broken"}).json()["items"]
    assert {b["id"] for b in broken} == {
        ids["/status/404"],
        ids["/status/500"],
        ids["closed"],
        ids["dns"],
    }
    overview = fast.http.get("/bookmarks/health").json()
    assert overview == {
        "checked": 7, "unchecked": 1, "broken": 4, "confirmed": 0, "unconfirmed": 4,
        "running": None,
    }  # fmt: skip

    # Checked a moment ago: a second batch of ids re-checks them (ids always do), history grows.
    again = fast.http.post("/bookmarks/health", json={"ids": [ids["/status/404"], other]})
    assert again.status_code == 202 and again.json()["total"] == 2
    assert finished(fast, again.json()["id"])["done"] == 2
    history = fast.http.get(f"/bookmarks/{ids['/status/404']}/health").json()
    assert [h["result"] for h in history] == ["client_error", "client_error"]
    assert history[0]["checked_at"] >= history[1]["checked_at"]
    assert (
        fast.http.get(f"/bookmarks/{other}/health", params={"limit": 1}).json()[0]["result"] == "ok"
    )
    # The first check is still readable by its id.
    assert fast.http.get(f"/bookmarks/health/{check['id']}").json()["done"] == 7


def test_recent_links_are_skipped_unless_forced(fast, web):
    fast.add(web.url("/ok"), title="fresh")
    first = fast.http.post("/bookmarks/health", json={}).json()
    assert finished(fast, first["id"])["done"] == 1
    skipped = fast.http.post("/bookmarks/health", json={}).json()
    assert (skipped["total"], skipped["too_recent"]) == (0, 1)
    assert finished(fast, skipped["id"])["state"] == "done"
    forced = fast.http.post("/bookmarks/health", json={"force": True}).json()
    assert forced["total"] == 1 and finished(fast, forced["id"])["by_result"] == {"ok": 1}


def test_one_batch_at_a_time_and_errors_are_json(patient, web):
    fast = patient
    slow = fast.add(web.url("/slow"), title="slow")["id"]
    running = fast.http.post("/bookmarks/health", json={"ids": [slow]})
    assert running.status_code == 202
    busy = fast.http.post("/bookmarks/health", json={"ids": [slow]})
    body = assert_error(busy, 429)
    assert running.json()["id"] in body["details"] and busy.headers["retry-after"]
    assert fast.http.get("/bookmarks/health").json()["running"] == running.json()["id"]
    assert finished(fast, running.json()["id"])["by_result"] == {"timeout": 1}

    assert_error(fast.http.get("/bookmarks/health/no-such-check"), 404)
    assert_error(fast.http.post("/bookmarks/health", json={"ids": [424242]}), 404)
    assert_error(fast.http.post("/bookmarks/health", json={"query": "tag:"}), 400)
    assert_error(fast.http.post("/bookmarks/health", json={"query": "((("}), 400)
    assert_error(fast.http.post("/bookmarks/health", json={"ids": "1"}), 422)
    assert_error(fast.http.post("/bookmarks/health", json={"ids": [2**64]}), 422)
    assert_error(fast.http.post("/bookmarks/health", json={"ids": [-1]}), 422)
    assert_error(fast.http.post("/bookmarks/health", json={"everything": True}), 422)
    assert_error(fast.http.post("/bookmarks/health", content=b"{"), 400)
    assert_error(fast.http.get("/bookmarks/424242/health"), 404)
    assert_error(fast.http.get(f"/bookmarks/{slow}/health", params={"limit": 0}), 400)
    # None of the refused requests started a check.
    assert fast.http.get("/bookmarks/health").json()["running"] is None


def test_content_is_fetched_now_and_read_back(fast, web):
    web.pages["tea"] = ("Tea notes", "Oolong leaves unfurl slowly")
    page = fast.add(web.url("/page/tea"))["id"]
    assert_error(fast.http.get(f"/bookmarks/{page}/content"), 404)

    fetched = fast.http.post(f"/bookmarks/{page}/content")
    assert fetched.status_code == 200, fetched.text
    assert (fetched.json()["outcome"], fetched.json()["kind"]) == ("stored", "html")
    stored = fast.http.get(f"/bookmarks/{page}/content").json()
    assert "Oolong leaves unfurl slowly" in stored["text"]
    assert stored["meta"]["title"] == "Tea notes" and stored["meta"]["status"] == 200
    # The empty title was filled from the page, as the CLI's refresh does.
    assert fast.http.get(f"/bookmarks/{page}").json()["title"] == "Tea notes"
    # Full-text search now finds the page's words.
    hits = fast.http.get("/search", params={"q": "oolong", "fts": 1}).json()["hits"]
    assert [hit["bookmark"]["id"] for hit in hits] == [page]

    failing = fast.add(web.url("/status/404"), title="gone")["id"]
    assert fast.http.post(f"/bookmarks/{failing}/content").json()["outcome"] == "failed"
    assert_error(fast.http.post("/bookmarks/424242/content"), 404)
    assert_error(fast.http.get("/bookmarks/424242/content"), 404)
    assert_error(fast.http.post(f"/bookmarks/{page}/content", params={"force": "maybe"}), 400)


def test_plugins_are_listed(served):
    listed = served.http.get("/plugins")
    assert listed.status_code == 200
    keywords = next(p for p in listed.json() if p["name"] == "keywords")
    assert (keywords["type"], keywords["builtin"], keywords["enabled"]) == (
        "tag_suggester",
        True,
        True,
    )


def test_api_writes_fire_plugin_hooks(plugin_site, tmp_path):
    journal = tmp_path / "journal.txt"
    journal.touch()
    env = {"PYTHONPATH": str(plugin_site), "MARKS_EXAMPLE_JOURNAL": str(journal)}
    marks_cli(tmp_path, "plugin", "disable", "aa-late", env=env)
    journal.write_text("")
    server = Served(
        start_marks(tmp_path / "lib.db", tmp_path, env=env), tmp_path / "lib.db", tmp_path
    )
    try:
        plugins = {p["name"]: p for p in server.http.get("/plugins").json()}
        assert {"stamp", "zz-early", "grumpy", "needy"} <= set(plugins)
        assert plugins["aa-late"]["enabled"] is False
        assert "missing dependencies" in plugins["needy"]["problem"]

        added = server.add("https://example.invalid/page")
        # The enricher filled the empty title and added its tag before the bookmark was stored.
        assert (added["title"], added["tags"]) == ("Stamped title", ["stamped"])
        server.http.patch(f"/bookmarks/{added['id']}", json={"title": "Changed"})
        assert server.http.delete(f"/bookmarks/{added['id']}").status_code == 204
        lines = journal.read_text().splitlines()
        assert lines[:3] == ["early on_load", "stamp enrich https://example.invalid/page",
                             f"early added {added['id']} Stamped title"]  # fmt: skip
        assert "late on_load" not in lines  # disabled in the config
        # grumpy failed in on_bookmark_added: reported once in the server's log, writes went on.
        assert wait_until(lambda: "plugin grumpy failed" in server.process.output)
        assert server.process.output.count("plugin grumpy failed") == 1
        second = server.add("https://example.invalid/other")
        assert second["title"] == "Stamped title"
    finally:
        server.close()
    # A server that stops unloads its plugins, as a command that ends does.
    assert journal.read_text().splitlines()[-1] == "early on_unload"


def test_finished_checks_are_kept_a_while_then_forgotten(db_path):
    from marks import health
    from marks.library import Library
    from marks.server.background import KEEP
    from marks.server.health_checks import HealthChecks
    from marks.store import Store

    setup = Library(Store(db_path))
    target = setup.add("http://gone.invalid/page").id
    checks = HealthChecks(lambda: Library(Store(db_path)), health.Options(timeout=1, retries=0))
    started = []
    for _ in range(KEEP + 2):
        check = checks.start(health.Selection(ids=(target,)))
        started.append(check.id)
        assert wait_until(lambda c=check: checks.get(c.id).state == "done", timeout=30)
        assert checks.running is None
    assert checks.get(started[0]) is None and checks.get(started[1]) is None
    kept = [checks.get(check_id) for check_id in started[2:]]
    assert all(item.results[0].result == "dns" for item in kept)
    assert len(health.Health(setup).history(target, limit=100)) == KEEP + 2
    setup.store.close()
