"""`marks serve` against a live server: every endpoint, its errors, and what a client sees."""

import csv
import io
import json

import msgspec

from support.jsonerrors import assert_error


def test_add_get_change_visit_and_delete(served):
    made = served.add("https://example.com/a", title="A", tags=["dev/python", "x"], starred=True)
    assert made["id"] > 0 and made["tags"] == ["dev/python", "x"] and made["starred"] is True
    again = served.http.post("/bookmarks", json={"url": "HTTPS://Example.com/a"})
    assert assert_error(again, 409)["existing_id"] == made["id"]

    got = served.http.get(f"/bookmarks/{made['id']}").json()
    assert got == made

    changed = served.http.patch(f"/bookmarks/{made['id']}", json={"title": "B", "tags": ["y"]})
    assert changed.status_code == 200
    assert changed.json()["title"] == "B" and changed.json()["tags"] == ["y"]
    assert changed.json()["starred"] is True  # fields not sent stay as they were
    assert_error(served.http.patch(f"/bookmarks/{made['id']}", json={"id": 9}), 422)
    assert_error(served.http.patch(f"/bookmarks/{made['id']}", json={"title": 3}), 422)
    assert_error(served.http.patch(f"/bookmarks/{made['id']}", content=b"{not json"), 400)

    visited = served.http.post(f"/bookmarks/{made['id']}/visit").json()
    assert visited["visit_count"] == 1 and visited["last_visited"]

    assert served.http.delete(f"/bookmarks/{made['id']}").status_code == 204
    assert_error(served.http.get(f"/bookmarks/{made['id']}"), 404)
    assert_error(served.http.delete(f"/bookmarks/{made['id']}"), 404)
    assert_error(served.http.get("/bookmarks/99999999999999999999999"), 404)


def test_add_refuses_bad_input_with_the_reason(served):
    assert_error(served.http.post("/bookmarks", json={"url": "no scheme here"}), 422)
    assert_error(served.http.post("/bookmarks", json={"title": "no url"}), 422)
    assert_error(served.http.post("/bookmarks", json={"url": "https://a.example", "x": 1}), 422)
    assert_error(
        served.http.post("/bookmarks", json={"url": "https://a.example", "tags": [","]}), 422
    )
    assert served.http.get("/stats").json()["bookmarks"] == 0  # nothing half-written


def test_list_pages_filters_sorts_and_queries(served):
    for number in range(60):
        served.add(
            f"https://example.com/{number}",
            title=f"page {number:02d}",
            tags=["even" if number % 2 == 0 else "odd"],
            starred=number < 5,
        )
    first = served.http.get("/bookmarks").json()
    assert len(first["items"]) == 50 and first["has_more"] is True  # the default limit
    rest = served.http.get("/bookmarks", params={"offset": 50}).json()
    assert len(rest["items"]) == 10 and rest["has_more"] is False
    assert {b["id"] for b in first["items"]}.isdisjoint(b["id"] for b in rest["items"])

    by_title = served.http.get("/bookmarks", params={"sort": "title", "limit": 3}).json()
    assert [b["title"] for b in by_title["items"]] == ["page 00", "page 01", "page 02"]
    reverse = served.http.get("/bookmarks", params={"sort": "title", "reverse": 1, "limit": 1})
    assert reverse.json()["items"][0]["title"] == "page 59"

    starred = served.http.get("/bookmarks", params={"starred": "true", "limit": 1000}).json()
    assert len(starred["items"]) == 5
    odd = served.http.get("/bookmarks", params={"tag": "odd", "limit": 1000}).json()
    assert len(odd["items"]) == 30
    query = served.http.get("/bookmarks", params={"query": 'tag:even and title ~ "page 1"'})
    assert sorted(b["title"] for b in query.json()["items"]) == [
        "page 10",
        "page 12",
        "page 14",
        "page 16",
        "page 18",
    ]

    assert_error(served.http.get("/bookmarks", params={"limit": 1001}), 400)
    assert_error(served.http.get("/bookmarks", params={"limit": 0}), 400)
    assert_error(served.http.get("/bookmarks", params={"limit": "many"}), 400)
    assert_error(served.http.get("/bookmarks", params={"sort": "nope"}), 400)
    assert_error(served.http.get("/bookmarks", params={"query": "visits >"}), 400)


def test_lookup_normalises_the_url_like_every_front_end(served):
    made = served.add("https://Example.com:443/path?q=1#frag")
    found = served.http.get(
        "/bookmarks/lookup", params={"url": "HTTPS://example.COM/path?q=1#frag"}
    )
    assert found.status_code == 200 and found.json()["id"] == made["id"]
    # The same `urls.key` as imports and the CLI: another path is another page.
    assert_error(
        served.http.get("/bookmarks/lookup", params={"url": "https://example.com/pat"}), 404
    )
    assert_error(served.http.get("/bookmarks/lookup"), 400)


def test_tags_counts_tree_completion_rename_and_delete(served):
    one = served.add("https://a.example/1", tags=["dev/python", "news"])
    served.add("https://a.example/2", tags=["dev/rust"])
    counts = {t["name"]: t["count"] for t in served.http.get("/tags").json()}
    assert counts == {"dev": 2, "dev/python": 1, "dev/rust": 1, "news": 1}
    tree = served.http.get("/tags", params={"tree": 1}).json()
    dev = next(node for node in tree if node["name"] == "dev")
    assert dev["count"] == 2 and [c["path"] for c in dev["children"]] == ["dev/python", "dev/rust"]
    assert served.http.get("/tags/complete", params={"prefix": "dev/"}).json() == [
        "dev/python",
        "dev/rust",
    ]

    renamed = served.http.patch("/tags/dev", json={"name": "code"})
    assert renamed.json() == {"bookmarks": 2}
    assert served.http.get(f"/bookmarks/{one['id']}").json()["tags"] == ["code/python", "news"]
    assert_error(served.http.patch("/tags/nothing", json={"name": "x"}), 404)
    assert_error(served.http.patch("/tags/code", json={"name": "code/inner"}), 422)

    deleted = served.http.delete("/tags/code")
    assert deleted.json() == {"bookmarks": 2}
    assert served.http.get(f"/bookmarks/{one['id']}").json()["tags"] == ["news"]
    assert served.http.get("/stats").json()["bookmarks"] == 2  # bookmarks stay


def test_bulk_tagging_is_all_or_nothing(served):
    a, b = served.add("https://a.example/1"), served.add("https://a.example/2")
    done = served.http.post("/bookmarks/tags", json={"ids": [a["id"], b["id"]], "add": ["later"]})
    assert done.json() == {"changed": 2}
    missing = served.http.post("/bookmarks/tags", json={"ids": [a["id"], 999], "add": ["other"]})
    assert_error(missing, 404)
    assert served.http.get(f"/bookmarks/{a['id']}").json()["tags"] == ["later"]
    for huge in (2**64 - 1, 10**30):  # ids SQLite cannot hold: refused, never a crash
        assert_error(served.http.post("/bookmarks/tags", json={"ids": [huge], "add": ["x"]}), 422)


def test_search_ranks_full_text_with_snippets(served):
    served.add("https://a.example/1", title="Cooking pasta", description="boil water")
    served.add("https://a.example/2", title="Travel", description="notes about pasta in Rome")
    hits = served.http.get("/search", params={"q": "pasta", "fts": 1}).json()["hits"]
    assert [h["bookmark"]["title"] for h in hits] == ["Cooking pasta", "Travel"]  # title first
    assert all("[pasta]" in h["snippet"] for h in hits)
    plain = served.http.get("/search", params={"q": "boil"}).json()["hits"]
    assert [h["bookmark"]["title"] for h in plain] == ["Cooking pasta"]
    assert_error(served.http.get("/search", params={"q": '"open', "fts": 1}), 422)
    assert_error(served.http.get("/search", params={"q": " "}), 400)
    assert_error(served.http.get("/search"), 400)


def test_stats_count_the_library(served):
    made = served.add("https://a.example/1", starred=True, tags=["t"])
    served.add("https://a.example/2")
    served.http.post(f"/bookmarks/{made['id']}/visit")
    stats = served.http.get("/stats").json()
    assert stats["bookmarks"] == 2 and stats["starred"] == 1 and stats["unread"] == 1
    assert stats["untagged"] == 1 and stats["total_visits"] == 1


def test_by_date_walks_year_month_day(served):
    lines = [
        {"url": "https://a.example/1", "added": "2023-05-17T10:00:00Z"},
        {"url": "https://a.example/2", "added": "2023-05-18T10:00:00Z"},
        {
            "url": "https://a.example/3",
            "added": "2024-01-02T10:00:00Z",
            "last_visited": "2024-02-01T09:00:00Z",
            "visit_count": 1,
        },
    ]
    report = served.http.post("/import/json", content=json.dumps(lines).encode())
    assert report.json()["added"] == 3
    years = served.http.get("/bookmarks/by-date", params={"granularity": "year"}).json()
    assert years["periods"] == [{"period": "2024", "count": 1}, {"period": "2023", "count": 2}]
    months = served.http.get("/bookmarks/by-date", params={"granularity": "month", "year": 2023})
    assert months.json()["periods"] == [{"period": "2023-05", "count": 2}]
    days = served.http.get(
        "/bookmarks/by-date", params={"granularity": "day", "year": 2023, "month": 5}
    ).json()
    assert [p["period"] for p in days["periods"]] == ["2023-05-18", "2023-05-17"]
    one_day = served.http.get(
        "/bookmarks/by-date", params={"granularity": "day", "year": 2023, "month": 5, "day": 17}
    ).json()
    assert [b["url"] for b in one_day["bookmarks"]] == ["https://a.example/1"]
    visited = served.http.get("/bookmarks/by-date", params={"field": "visited"}).json()
    assert visited["periods"] == [{"period": "2024", "count": 1}]
    assert_error(served.http.get("/bookmarks/by-date", params={"granularity": "month"}), 400)
    assert_error(served.http.get("/bookmarks/by-date", params={"field": "eaten"}), 400)


def test_exports_stream_every_format(served):
    served.add("https://a.example/1", title='<script>alert("x")</script>', tags=["a/b"])
    served.add("https://a.example/2", title="second", description="d")
    exported = served.http.get("/export/json")
    assert exported.headers["content-type"].startswith("application/json")
    assert "attachment" in exported.headers["content-disposition"]
    assert {b["url"] for b in exported.json()} == {"https://a.example/1", "https://a.example/2"}
    html = served.http.get("/export/html", params={"hierarchical": 1}).text
    assert "&lt;script&gt;" in html and "<script>" not in html
    rows = list(csv.DictReader(io.StringIO(served.http.get("/export/csv").text)))
    assert {r["url"] for r in rows} == {"https://a.example/1", "https://a.example/2"}
    assert "second" in served.http.get("/export/markdown").text
    assert_error(served.http.get("/export/pdf"), 404)


def test_import_takes_a_file_and_reports_like_the_cli(served):
    html = (
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n"
        '<DT><H3>Work</H3>\n<DL><p>\n<DT><A HREF="https://w.example/">W</A>\n</DL><p>\n'
        '<DT><A HREF="not a url">bad</A>\n</DL><p>\n'
    )
    report = served.http.post("/import/html", content=html.encode()).json()
    assert report["added"] == 1 and report["invalid"] == 1 and report["problems"]
    again = served.http.post("/import/html", content=html.encode()).json()
    assert again["added"] == 0 and again["skipped"] == 1
    found = served.http.get("/bookmarks/lookup", params={"url": "https://w.example/"}).json()
    assert found["tags"] == ["Work"]
    bad = assert_error(served.http.post("/import/json", content=b"\xff\xfe not json"), 422)
    assert "tmp" not in bad["details"]  # the spool file's name stays private
    assert_error(served.http.post("/import/docx", content=b"x"), 404)
    assert served.http.get("/stats").json()["bookmarks"] == 1  # the failed imports left nothing


def test_bodies_are_capped(served):
    big = b'{"url": "https://a.example", "title": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    assert_error(served.http.post("/bookmarks", content=big), 413)

    def chunks():  # no Content-Length: the server counts as it reads
        for _ in range(40):
            yield b"x" * 65536

    assert_error(served.http.post("/bookmarks", content=chunks()), 413)


def test_errors_are_json_bodies(served):
    assert_error(served.http.get("/nowhere"), 404)
    assert_error(served.http.put("/bookmarks"), 405)
    assert_error(served.http.get("/bookmarks/abc"), 404)


def test_openapi_describes_every_route(served):
    document = served.http.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    for path, method in [
        ("/bookmarks", "get"), ("/bookmarks", "post"), ("/bookmarks/{id}", "patch"),
        ("/bookmarks/{id}", "delete"), ("/bookmarks/{id}/visit", "post"), ("/tags", "get"),
        ("/tags/{name}", "patch"), ("/tags/{name}", "delete"), ("/stats", "get"),
        ("/search", "get"), ("/export/{format}", "get"), ("/bookmarks/by-date", "get"),
        ("/import/{format}", "post"), ("/bookmarks/lookup", "get"), ("/tags/complete", "get"),
    ]:  # fmt: skip
        assert method in paths[path], (path, method)
    assert "Bookmark" in document["components"]["schemas"]
    msgspec.json.decode(json.dumps(document).encode())  # plain JSON, no Python objects
