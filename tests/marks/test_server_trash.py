"""REST `/trash` and `/undo`: in-process (the real app and a real SQLite file, called through
httpx's ASGI transport) and against a live `marks serve`."""

import pytest

from marks.server.settings import ServerSettings
from support.jsonerrors import assert_error
from support.marksserve import in_process


@pytest.fixture
def client(db_path):
    settings = ServerSettings(db=db_path, names=("testserver",))
    with in_process(settings) as http:
        yield http


def test_delete_list_restore_and_undo_in_process(client):
    made = [
        client.post("/bookmarks", json={"url": f"https://{n}.example/", "title": f"page {n}",
                                        "tags": ["t"]}).json()
        for n in range(3)
    ]  # fmt: skip
    assert client.post("/queue", json={"ids": [made[0]["id"]]}).status_code == 201
    for bookmark in made[:2]:
        assert client.delete(f"/bookmarks/{bookmark['id']}").status_code == 204
    listed = client.get("/trash").json()
    assert [e["id"] for e in listed] == [made[1]["id"], made[0]["id"]]
    assert listed[1]["rows"] == 4 and listed[1]["title"] == "page 0"  # bookmark, link, tag, queue

    back = client.post(f"/trash/{made[0]['id']}/restore").json()
    assert back["restored"][0]["id"] == made[0]["id"] and back["notes"] == []
    assert client.get(f"/bookmarks/{made[0]['id']}").json() == made[0]
    assert [q["id"] for q in client.get("/queue").json()] == [made[0]["id"]]
    assert_error(client.post(f"/trash/{made[0]['id']}/restore"), 404)

    report = client.post("/undo").json()  # the second delete
    assert report["action"] == "delete" and [r["id"] for r in report["restored"]] == [made[1]["id"]]
    assert report["message"].startswith("undid delete (deleted 1 bookmark(s): ")
    # The first delete's bookmark came back by hand: no step is left to spend an undo on.
    assert_error(client.post("/undo"), 404)
    assert client.get("/stats").json()["bookmarks"] == 3


def test_undo_of_a_tag_rename_and_a_bulk_tagging_over_rest(client):
    made = client.post("/bookmarks", json={"url": "https://a.example/", "tags": ["old/x"]}).json()
    assert client.patch("/tags/old", json={"name": "new"}).json() == {"bookmarks": 1}
    assert client.post("/undo").json()["summary"] == "renamed tag 'old' to 'new' on 1 bookmark(s)"
    assert client.get(f"/bookmarks/{made['id']}").json()["tags"] == ["old/x"]
    client.post("/bookmarks/tags", json={"ids": [made["id"]], "add": ["bulk"], "remove": ["old/x"]})
    assert client.post("/undo").json()["action"] == "bulk tags"
    assert client.get(f"/bookmarks/{made['id']}").json() == made


def test_empty_the_trash_and_bad_input_over_rest(client):
    made = client.post("/bookmarks", json={"url": "https://a.example/"}).json()
    client.delete(f"/bookmarks/{made['id']}")
    assert client.delete("/trash", params={"older_than": 3}).json() == {"removed": 0}
    assert_error(client.delete("/trash", params={"older_than": "soon"}), 400)
    assert_error(client.delete("/trash", params={"older_than": -1}), 400)
    assert_error(client.delete("/trash", params={"older_than": 10**18}), 400)
    assert client.delete("/trash").json() == {"removed": 1}
    assert client.get("/trash").json() == []
    assert_error(client.post("/trash/99999999999999999999/restore"), 404)


def test_openapi_documents_the_trash_and_undo(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/trash"]) == {"get", "delete"}
    assert "post" in paths["/trash/{id}/restore"] and "post" in paths["/undo"]


def test_live_server_restores_a_url_added_again_and_keeps_both(served):
    first = served.add("https://same.example/", title="first")
    assert served.http.delete(f"/bookmarks/{first['id']}").status_code == 204
    second = served.add("https://same.example/", title="second")
    back = served.http.post(f"/trash/{first['id']}/restore")
    assert back.status_code == 200
    assert back.json()["restored"][0]["same_as"] == second["id"]
    assert back.json()["notes"] == [
        f"bookmark {first['id']} (https://same.example/) was bookmarked again meanwhile as "
        f"{second['id']}: both are kept (`marks db dedupe` merges them)"
    ]
    titles = {b["title"] for b in served.http.get("/bookmarks").json()["items"]}
    assert titles == {"first", "second"}
    assert served.http.get("/search", params={"q": "first", "fts": 1}).json()["hits"]
    assert_error(served.http.post("/undo"), 404)  # the delete was undone by hand
