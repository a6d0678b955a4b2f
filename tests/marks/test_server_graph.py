"""`/graph` on a live `marks serve`: background builds, stats, neighbours and exports, each the
same as `marks graph` says for the same database."""

import json
import sqlite3

import pytest

from support.graphfiles import read_graph
from support.jsonerrors import assert_error
from support.marksrun import Runner
from support.servers import wait_until


@pytest.fixture
def sample(served) -> dict[str, int]:
    """Bookmarks related by tags (dev/python, dev/rust), by site (python.org) and by nothing."""
    made = {
        "a": served.add("https://docs.python.org/3/", title="Python docs",
                        tags=["dev/python", "web", "imported/chrome"]),
        "b": served.add("https://realpython.com/", title="Real Python", tags=["dev/python"]),
        "c": served.add("https://doc.rust-lang.org/", title="Rust docs", tags=["dev/rust"]),
        "d": served.add("https://www.python.org/about/", title="About Python"),
        "e": served.add("https://cooking.example/", title="Cooking", tags=["food"]),
    }  # fmt: skip
    return {name: bookmark["id"] for name, bookmark in made.items()}


def finished(served, build_id: str) -> dict:
    """Poll the build until it is no longer running (the condition, not a fixed wait)."""
    answers: list[dict] = []

    def done() -> bool:
        answer = served.http.get(f"/graph/build/{build_id}")
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
        return answers[-1]["state"] != "running"

    assert wait_until(done, timeout=60, interval=0.05), answers[-1]
    return answers[-1]


def build(served) -> dict:
    started = served.http.post("/graph/build")
    assert started.status_code == 202, started.text
    assert started.json()["state"] in ("running", "done")
    report = finished(served, started.json()["id"])
    assert report["state"] == "done" and report["error"] is None, report
    return report


def cli_json(served, *args: str):
    result = Runner(served.db)("graph", *args, "--output", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_reading_before_the_first_build_is_the_clis_error_as_409(served, sample):
    cli = Runner(served.db)("graph", "neighbors", str(sample["a"]))
    assert cli.code == 1 and "graph is not built yet" in cli.err
    for path in ("/graph/stats", f"/graph/neighbors/{sample['a']}", "/graph/export/gexf"):
        body = assert_error(served.http.get(path), 409)
        assert "graph is not built yet" in body["details"]


def test_a_build_runs_in_the_background_and_the_graph_reads_as_in_the_cli(served, sample):
    report = build(served)
    assert (report["report"]["nodes"], report["steps_done"], report["step"]) == (5, 5, None)
    assert report["finished_at"] >= report["started_at"]

    stats = served.http.get("/graph/stats")
    assert stats.status_code == 200
    assert stats.json() == cli_json(served, "stats")
    assert stats.json()["edges"] == report["report"]["edges"] > 0
    assert stats.json()["isolated"] == 1  # cooking shares nothing (imported/* is provenance)

    near = served.http.get(f"/graph/neighbors/{sample['a']}")
    assert near.status_code == 200
    assert near.json() == cli_json(served, "neighbors", str(sample["a"]))
    rows = {row["id"]: row for row in near.json()}
    assert list(rows) == [sample["b"], sample["d"], sample["c"]]  # strongest first
    assert rows[sample["b"]]["shared_tags"] == ["dev/python"]
    assert rows[sample["b"]]["weight"] == pytest.approx(2 / 3)
    assert rows[sample["d"]]["site"] == "python.org" and "same site" in rows[sample["d"]]["why"]
    one = served.http.get(f"/graph/neighbors/{sample['a']}", params={"limit": 1}).json()
    assert [row["id"] for row in one] == [sample["b"]]
    assert served.http.get(f"/graph/neighbors/{sample['e']}").json() == []

    # A bookmark added later is a node of the next build; the old build stays readable.
    served.add("https://www.python.org/downloads/", title="Downloads", tags=["dev/python"])
    again = build(served)
    assert again["report"]["nodes"] == 6 and again["id"] != report["id"]
    assert served.http.get(f"/graph/build/{report['id']}").json()["state"] == "done"


@pytest.mark.parametrize(
    ("fmt", "media"),
    [
        ("gexf", "application/gexf+xml"),
        ("graphml", "application/graphml+xml"),
        ("json", "application/json"),
    ],
)
def test_exports_stream_and_networkx_reads_them_back(served, sample, fmt, media):
    served.add("https://python.org/x", title='<&> "quoted" \x01 ctl é', tags=["dev/python"])
    build(served)
    stats = served.http.get("/graph/stats").json()
    with served.http.stream("GET", f"/graph/export/{fmt}") as exported:
        assert exported.status_code == 200
        assert exported.headers["content-type"].split(";")[0] == media
        disposition = exported.headers["content-disposition"]
        assert disposition == f'attachment; filename="marks-graph.{fmt}"'
        assert "content-length" not in exported.headers  # streamed, not built whole
        data = exported.read()
    graph = read_graph(fmt, data)
    assert graph.number_of_nodes() == stats["nodes"] == 6
    assert graph.number_of_edges() == stats["edges"]
    assert data == Runner(served.db)("graph", "export", fmt).out.encode()  # the CLI's file


def test_one_build_at_a_time_and_errors_are_json(served, sample):
    # Another writer holds SQLite's write lock, so the build waits in its transaction (the
    # server's busy timeout) and stays running until the lock is let go.
    writer = sqlite3.connect(served.db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        running = served.http.post("/graph/build")
        assert running.status_code == 202 and running.json()["state"] == "running"
        build_id = running.json()["id"]
        busy = served.http.post("/graph/build")
        body = assert_error(busy, 429)
        assert build_id in body["details"] and busy.headers["retry-after"]
        assert served.http.get(f"/graph/build/{build_id}").json()["state"] == "running"
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert finished(served, build_id)["state"] == "done"

    assert_error(served.http.get("/graph/build/no-such-build"), 404)
    assert_error(served.http.get("/graph/neighbors/424242"), 404)
    assert_error(served.http.get("/graph/neighbors/99999999999999999999999"), 404)
    assert_error(served.http.get(f"/graph/neighbors/{sample['a']}", params={"limit": 0}), 400)
    assert_error(served.http.get(f"/graph/neighbors/{sample['a']}", params={"limit": "x"}), 400)
    assert_error(served.http.get("/graph/export/pdf"), 404)
    assert_error(served.http.put("/graph/build"), 405)


def test_a_build_from_another_site_needs_the_token(served, sample):
    cross = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    assert_error(served.http.post("/graph/build", headers=cross), 403)
    assert_error(served.http.get("/graph/stats", headers=cross), 403)
    paired = served.http.post("/graph/build", headers={**cross, **served.authed()})
    assert paired.status_code == 202
    assert finished(served, paired.json()["id"])["state"] == "done"
