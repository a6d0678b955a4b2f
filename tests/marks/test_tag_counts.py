"""Tag counts (the sidebar's tree, `tag list`): exact whatever tags a bookmark has, and never
stale after a change, whoever made it."""

from hypothesis import given, settings
from hypothesis import strategies as st

from marks import tagnames
from marks.library import Library
from marks.store import Store
from support.marksrun import Runner

# Few segments, so bookmarks often have two tags under one parent (the case a sum gets wrong).
SEGMENT = st.sampled_from(["a", "b", "A", "dev", "Dév", "x y"])
TAG = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)


def _by_sets(tag_sets: list[list[str]], library: Library) -> list[tuple[str, int, int]]:
    """The counts as sets of bookmarks: each node's bookmarks, descendants included."""
    total: dict[str, set[int]] = {}
    direct: dict[str, set[int]] = {}
    for bookmark_id, _ in enumerate(tag_sets, 1):
        for name in library.get(bookmark_id).tags:  # as stored: case-folded duplicates are one
            direct.setdefault(name, set()).add(bookmark_id)
            for node in (*tagnames.ancestors(name), name):
                total.setdefault(node, set()).add(bookmark_id)
    return [
        (name, len(total[name]), len(direct.get(name, ())))
        for name in sorted(total, key=str.casefold)
    ]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(TAG, max_size=4), min_size=1, max_size=12))
def test_counts_are_the_bookmarks_under_each_tag_counted_once(tag_sets):
    store = Store(":memory:")
    try:
        library = Library(store)
        for number, tags in enumerate(tag_sets):
            library.add(f"https://example.com/{number}", tags=tags)
        counted = [(c.name, c.count, c.direct) for c in library.tag_counts()]
        assert counted == _by_sets(tag_sets, library)
    finally:
        store.close()


def test_counts_follow_changes_from_this_connection_and_from_another(db_path):
    store = Store(db_path)
    library = Library(store)
    first = library.add("https://example.com/1", tags=["dev/python", "dev/rust"])
    assert [(c.name, c.count) for c in library.tag_counts()] == [
        ("dev", 1),
        ("dev/python", 1),
        ("dev/rust", 1),
    ]
    library.add("https://example.com/2", tags=["dev/python"])  # this connection
    assert {c.name: c.count for c in library.tag_counts()}["dev"] == 2

    other = Store(db_path)  # another connection, as another `marks` process
    Library(other).tag_add("dev/go", [first.id])
    Library(other).tag_remove("dev/python", [first.id])
    other.close()
    assert [(c.name, c.count) for c in library.tag_counts()] == [
        ("dev", 2),
        ("dev/go", 1),
        ("dev/python", 1),
        ("dev/rust", 1),
    ]
    library.tag_rename("dev", "code")
    assert library.tag_counts()[0].name == "code"
    library.delete([first.id])
    assert [(c.name, c.count) for c in library.tag_counts()] == [
        ("code", 1),
        ("code/python", 1),
    ]
    store.close()


def test_the_served_tree_shows_a_change_made_by_the_cli(served):
    made = served.add("https://example.com/1", tags=["dev/python"])
    tree = served.http.get("/tags", params={"tree": 1}).json()
    assert [(node["path"], node["count"]) for node in tree] == [("dev", 1)]
    done = Runner(served.db).process("tag", "add", "dev/rust", str(made["id"]))  # its own process
    assert done.code == 0, done.err
    served.add("https://example.com/2", tags=["dev/rust"])
    tree = served.http.get("/tags", params={"tree": 1}).json()
    assert [(node["path"], node["count"]) for node in tree] == [("dev", 2)]
    assert [(c["path"], c["count"]) for c in tree[0]["children"]] == [
        ("dev/python", 1),
        ("dev/rust", 2),
    ]
