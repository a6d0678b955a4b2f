"""`/queue` on a live `marks serve`: the same rules as `marks queue`, errors as JSON bodies."""

from support.jsonerrors import assert_error


def test_queue_endpoints_follow_the_queue_rules(served):
    ids = [served.add(f"https://example.com/{n}", title=f"T{n}")["id"] for n in range(3)]
    added = served.http.post("/queue", json={"ids": ids[:2], "priority": 2})
    assert added.status_code == 201
    assert [(item["id"], item["priority"]) for item in added.json()] == [(ids[0], 2), (ids[1], 2)]
    assert served.http.post("/queue", json={"ids": [ids[2]]}).json()[0]["priority"] == 3

    moved = served.http.patch(f"/queue/{ids[1]}", json={"progress": 30})
    assert moved.status_code == 200 and moved.json()["progress"] == 30
    assert served.http.get("/queue/next").json()["id"] == ids[1]

    listed = served.http.get("/queue").json()
    assert [item["id"] for item in listed] == [ids[1], ids[0], ids[2]]

    done = served.http.patch(f"/queue/{ids[1]}", json={"progress": 100, "priority": 1}).json()
    assert done["completed_at"] is not None and done["priority"] == 1
    assert [item["id"] for item in served.http.get("/queue").json()] == [ids[0], ids[2]]
    assert len(served.http.get("/queue", params={"all": "true"}).json()) == 3

    stats = served.http.get("/queue/stats").json()
    assert (stats["queued"], stats["completed"], stats["in_progress"]) == (2, 1, 0)
    assert stats["by_priority"] == {"1": 0, "2": 1, "3": 1, "4": 0, "5": 0}
    assert stats["oldest"]["id"] == ids[0]

    assert served.http.delete(f"/queue/{ids[0]}").status_code == 204
    assert [item["id"] for item in served.http.get("/queue").json()] == [ids[2]]


def test_queue_errors_change_nothing(served):
    first = served.add("https://example.com/q", title="Q")["id"]
    assert served.http.post("/queue", json={"ids": [first]}).status_code == 201
    before = served.http.get("/queue", params={"all": "1"}).json()

    assert_error(served.http.post("/queue", json={"ids": [first]}), 409)
    assert_error(served.http.post("/queue", json={"ids": [999]}), 404)
    assert_error(served.http.post("/queue", json={"ids": [first], "priority": 9}), 422)
    assert_error(served.http.post("/queue", json={"ids": []}), 422)
    assert_error(served.http.post("/queue", json={"ids": "1"}), 422)
    assert_error(served.http.post("/queue", json={"ids": [first], "extra": 1}), 422)
    assert_error(served.http.patch(f"/queue/{first}", json={"progress": 101}), 422)
    assert_error(served.http.patch(f"/queue/{first}", json={"priority": 3, "progress": -1}), 422)
    assert_error(served.http.patch("/queue/424242", json={"progress": 5}), 404)
    assert_error(served.http.delete("/queue/424242"), 404)
    assert served.http.get("/queue", params={"all": "1"}).json() == before


def test_next_is_null_on_an_empty_queue(served):
    answer = served.http.get("/queue/next")
    assert answer.status_code == 200 and answer.json() is None
    assert served.http.get("/queue").json() == []
