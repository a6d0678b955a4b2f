"""The trash and undo (issue 25, item 5): deleting keeps every row that hangs on a bookmark,
restoring and `marks undo` put back exactly what was there, through the service, the CLI and the
shell. (REST, the live server and the web UI: test_server_trash.py, test_webui_trash.py.)"""

import datetime as dt
import json

import apsw
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from marks import journal, pagestore, trash
from marks.exceptions import MarksError, NotFound
from marks.library import Library
from marks.maintenance import duplicate_groups, merge_duplicates
from marks.queue import ReadingQueue
from marks.store import Store

# --- what a bookmark is, in every table -------------------------------------------------------


def content(store: Store, ids=None) -> dict:
    """Every row of every table that hangs on the bookmarks (all, or `ids`), tags by name: what
    a person can get back out of the library about them."""
    chosen = (
        ids
        if ids is not None
        else [i for (i,) in store.execute("SELECT id FROM bookmarks ORDER BY id")]
    )
    marks = ",".join(str(int(i)) for i in chosen) or "NULL"
    found = {
        "bookmarks": sorted(store.execute(f"SELECT * FROM bookmarks WHERE id IN ({marks})")),
        "tags": sorted(
            store.execute(
                "SELECT bt.bookmark_id, t.name FROM bookmark_tags bt "
                f"JOIN tags t ON t.id = bt.tag_id WHERE bt.bookmark_id IN ({marks})"
            )
        ),
    }
    for table, column in journal.dependents(store):
        if table == "bookmark_tags":
            continue
        key = f"{table}.{column}"
        found[key] = sorted(
            map(repr, store.execute(f'SELECT * FROM "{table}" WHERE "{column}" IN ({marks})'))
        )
    return found


def fts_ids(store: Store, word: str) -> list[int]:
    return sorted(
        i
        for (i,) in store.execute(
            "SELECT rowid FROM bookmarks_fts WHERE bookmarks_fts MATCH ?", (word,)
        )
    )


def furnished(library: Library) -> list[int]:
    """Three bookmarks with tags, a queue entry, health checks, page content, a snapshot and a
    graph edge: every kind of row that hangs on a bookmark today."""
    a = library.add("https://a.example/", title="Alpha zebra", tags=["dev/python", "x"]).id
    b = library.add("https://b.example/", title="Beta", description="zebra", tags=["x"]).id
    c = library.add("https://c.example/", title="Gamma", tags=["solo"]).id
    ReadingQueue(library.store).add([a], priority=2)
    store = library.store
    with store.transaction():
        for bookmark_id in (a, b):
            store.execute(
                "INSERT INTO health_checks (bookmark_id, checked_at, url, result, status, "
                "reachable, detail, elapsed_ms) VALUES (?, '2026-01-01T00:00:00Z', 'u', 'ok', 200, "
                "1, '', 12)",
                (bookmark_id,),
            )
        page = pagestore.put(store, b"<p>quokka</p>")
        store.execute(
            "INSERT INTO page_content (bookmark_id, fetched_at, url, status, kind, size, blob, "
            "text) VALUES (?, '2026-01-01T00:00:00Z', 'https://a.example/', 200, 'html', 13, ?, "
            "'quokka page text')",
            (a, page),
        )
        shot = pagestore.put(store, b"<html>snapshot of a</html>")
        store.execute(
            "INSERT INTO snapshots (bookmark_id, taken_at, url, source, blob, size, title) "
            "VALUES (?, '2026-01-02T00:00:00Z', 'https://a.example/', 'browser', ?, 26, 'A')",
            (a, shot),
        )
        store.execute(
            "INSERT INTO graph_edges (source, target, weight, tags) VALUES (?, ?, 0.5, 0.5)",
            (a, b),
        )
    return [a, b, c]


# --- deleting and restoring -------------------------------------------------------------------


def test_delete_moves_every_row_to_the_trash_and_restore_puts_them_back_exactly(library):
    ids = furnished(library)
    before = content(library.store)
    assert fts_ids(library.store, "quokka") == [ids[0]]

    library.delete(ids[:2])
    assert library.count() == 1
    assert fts_ids(library.store, "zebra") == [] and fts_ids(library.store, "quokka") == []
    listed = trash.entries(library)
    assert sorted(e.id for e in listed) == ids[:2]
    by_id = {e.id: e for e in listed}
    # a: bookmark, 2 tag links, 2 tags, queue, check, page, snapshot, edge;
    # b: bookmark, tag link, tag, check, edge
    assert by_id[ids[0]].rows == 10 and by_id[ids[1]].rows == 5
    assert library.store.value("SELECT count(*) FROM tags WHERE name = 'dev/python'") == 0

    # Page bodies nothing live refers to are collected (snapshot prune, db vacuum), but the
    # trash's rows still name these two: they stay.
    with library.store.transaction():
        pagestore.collect(library.store)
    assert library.store.value("SELECT count(*) FROM snapshot_blobs") == 2

    restored = trash.restore(library, ids[:2])
    assert sorted(r.id for r in restored) == ids[:2] and all(r.same_as is None for r in restored)
    assert content(library.store) == before
    assert fts_ids(library.store, "zebra") == ids[:2]
    assert fts_ids(library.store, "quokka") == [ids[0]]  # the page text is searchable again
    assert trash.entries(library) == []
    assert pagestore.check(library.store) == []  # every restored row finds its page
    library.store.execute("INSERT INTO bookmarks_fts (bookmarks_fts) VALUES ('integrity-check')")


def test_undo_of_a_delete_and_the_report_says_what_came_back(library):
    ids = furnished(library)
    before = content(library.store)
    library.delete(ids)
    report = trash.undo(library)
    assert report.action == "delete" and len(report.restored) == 3
    assert report.message.startswith("undid delete (deleted 3 bookmark(s): ")
    assert "restored 3 bookmark(s) from the trash" in report.message
    assert content(library.store) == before
    with pytest.raises(NotFound, match="nothing to undo"):
        trash.undo(library)


def test_a_new_bookmark_never_takes_an_id_the_trash_holds(library):
    ids = furnished(library)
    library.delete([ids[-1]])  # the highest id: SQLite alone would hand it out again
    fresh = library.add("https://fresh.example/")
    assert fresh.id == ids[-1] + 1
    assert trash.restore(library, [ids[-1]])[0].id == ids[-1]


def test_restoring_a_url_added_again_keeps_both_and_says_so(library, marks):
    first = library.add("https://same.example/page", title="old one", tags=["keep"]).id
    library.delete([first])
    again = library.add("https://SAME.example/page", title="new one").id
    (restored,) = trash.restore(library, [first])
    assert restored.id == first and restored.same_as == again
    assert "was bookmarked again meanwhile as" in trash.describe(restored)
    assert {b.title for b in library.iterate()} == {"old one", "new one"}
    assert library.find_by_url("https://same.example/page").id == again
    assert duplicate_groups(library) == [[first, again]]  # `db dedupe` offers to merge them
    assert library.store.value("SELECT same_as FROM url_key_collisions") == again


def test_a_crash_inside_the_delete_leaves_the_database_as_it_was(library):
    ids = furnished(library)
    before = content(library.store)
    store = library.store
    # A real failure in the middle: the third bookmark refuses to go, after two were moved.
    store.execute(
        f"CREATE TRIGGER refuse BEFORE DELETE ON bookmarks WHEN OLD.id = {ids[2]} "
        "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
    )
    with pytest.raises(apsw.ConstraintError, match="disk on fire"):
        library.delete(ids)
    store.execute("DROP TRIGGER refuse")
    assert content(store) == before
    assert store.value("SELECT count(*) FROM trash") == 0
    assert store.value("SELECT count(*) FROM trash_rows") == 0
    assert store.value("SELECT count(*) FROM undo_steps") == 0
    assert fts_ids(store, "zebra") == ids[:2]


def test_a_crash_inside_the_restore_leaves_the_trash_as_it_was(library):
    ids = furnished(library)
    library.delete(ids)
    kept = list(library.store.execute("SELECT * FROM trash_rows ORDER BY rowid"))
    library.store.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON reading_queue BEGIN SELECT RAISE(ABORT, 'no'); END"
    )
    with pytest.raises(apsw.ConstraintError):
        trash.undo(library)
    library.store.execute("DROP TRIGGER refuse")
    assert library.count() == 0
    assert list(library.store.execute("SELECT * FROM trash_rows ORDER BY rowid")) == kept
    assert len(trash.undo(library).restored) == 3  # the undo is still there


def test_trash_days_expire_entries_and_empty_older_than(db_path):
    clock = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    store = Store(db_path)
    library = Library(store, now=lambda: clock[0], trash_days=30)
    old = library.add("https://old.example/").id
    library.delete([old])
    clock[0] += dt.timedelta(days=10)
    newer = library.add("https://newer.example/").id
    library.delete([newer])
    assert trash.empty(library, older_than_days=20) == 0
    assert trash.empty(library, older_than_days=5) == 1  # the old one, deleted 10 days ago
    assert [e.id for e in trash.entries(library)] == [newer]
    clock[0] += dt.timedelta(days=31)
    last = library.add("https://last.example/").id
    library.delete([last])  # purges what expired (and the undo step it leaves empty) first
    assert [e.id for e in trash.entries(library)] == [last]  # past trash_days: gone
    with pytest.raises(NotFound, match="not in the trash"):
        trash.restore(library, [newer])
    assert [r.id for r in trash.undo(library).restored] == [last]
    with pytest.raises(NotFound, match="nothing to undo"):
        trash.undo(library)  # the steps of the expired deletes are forgotten with them
    store.close()


def test_restore_refuses_ids_not_in_the_trash_and_changes_nothing(library):
    ids = furnished(library)
    library.delete([ids[0]])
    with pytest.raises(NotFound, match="bookmark 999 is not in the trash"):
        trash.restore(library, [ids[0], 999])
    assert library.count() == 2 and len(trash.entries(library)) == 1


def test_a_table_added_later_is_trashed_and_restored_without_code(library):
    """What the snapshots table (another branch) will be: found through its foreign key."""
    ids = furnished(library)
    library.store.execute(
        "CREATE TABLE snapshots_like (id INTEGER PRIMARY KEY, bookmark_id INTEGER NOT NULL "
        "REFERENCES bookmarks (id) ON DELETE CASCADE, body BLOB, note TEXT)"
    )
    library.store.execute(
        'INSERT INTO snapshots_like (bookmark_id, body, note) VALUES (?, ?, \'{"not": "json"}\')',
        (ids[0], bytes(range(256))),
    )
    before = content(library.store)
    library.delete([ids[0]])
    assert library.store.value("SELECT count(*) FROM snapshots_like") == 0
    trash.undo(library)
    assert content(library.store) == before
    assert library.store.value("SELECT body FROM snapshots_like") == bytes(range(256))


# --- undo of each destructive change ----------------------------------------------------------


def test_undo_of_a_tag_rename_merge_and_delete(library):
    ids = furnished(library)
    before = content(library.store)
    library.tag_rename("dev", "code")
    assert trash.undo(library).message.startswith("undid tag rename (renamed tag 'dev' to 'code'")
    assert content(library.store) == before

    library.tag_rename("solo", "x")  # a merge into an existing tag
    assert library.store.value("SELECT action || ': ' || summary FROM undo_steps") == (
        "tag rename: merged tag 'solo' into 'x' on 1 bookmark(s)"
    )
    trash.undo(library)
    assert content(library.store) == before

    library.tag_rename("x", "X")  # only the case changes: the same tag, spelled anew
    trash.undo(library)
    assert content(library.store) == before

    library.tag_delete("x")
    report = trash.undo(library)
    assert report.changed == 2 and content(library.store) == before
    assert fts_ids(library.store, "x") == ids[:2]


def test_undo_of_bulk_tagging_an_edit_and_a_dedupe(library):
    ids = furnished(library)
    before = content(library.store)
    library.retag(ids, add=["new"], remove=["x"])
    trash.undo(library)
    assert content(library.store) == before

    library.update(ids[0], title="Renamed", url="https://moved.example/", tags=["other"])
    report = trash.undo(library)
    assert report.action == "update" and report.changed == 1
    assert content(library.store) == before
    assert library.find_by_url("https://a.example/").id == ids[0]

    library.update(ids[0], starred=True)  # not lossy: no undo step of its own
    assert library.store.value("SELECT count(*) FROM undo_steps") == 0
    library.update(ids[0], starred=False)

    dup = library.add("http://www.a.example", title="", tags=["from-dup"]).id
    library.visit(dup)
    before = content(library.store)
    assert merge_duplicates(library, duplicate_groups(library)) == 1
    assert library.count() == 3
    report = trash.undo(library)
    assert report.action == "dedupe" and [r.id for r in report.restored] == [dup]
    assert content(library.store) == before


def test_undo_walks_back_step_by_step_and_the_journal_is_bounded(library):
    ids = furnished(library)
    first = content(library.store)
    library.tag_add("one", ids)
    second = content(library.store)
    library.delete([ids[1]])
    trash.undo(library)
    assert content(library.store) == second
    trash.undo(library)
    assert content(library.store) == first
    for number in range(journal.UNDO_STEPS + 5):
        library.tag_add(f"t{number}", [ids[0]])
    assert library.store.value("SELECT count(*) FROM undo_steps") == journal.UNDO_STEPS


def test_undo_of_an_edit_whose_old_url_was_taken_meanwhile_refuses_and_changes_nothing(library):
    first = library.add("https://one.example/").id
    library.update(first, url="https://two.example/")
    library.add("https://one.example/")
    before = content(library.store)
    with pytest.raises(MarksError, match="bookmarked again as"):
        trash.undo(library)
    assert content(library.store) == before


# --- the property: any sequence, then undo, restores the prior content ------------------------

URLS = [f"https://site{n}.example/p" for n in range(5)] + ["http://www.site0.example/p/"]
TAG_NAMES = ["a", "a/b", "B", "c", "Äpfel", "äpfel/x"]
picks = st.lists(st.integers(0, 5), max_size=3)
changes = [  # the destructive changes undo covers
    st.tuples(st.just("tag"), st.sampled_from(TAG_NAMES), picks),
    st.tuples(st.just("untag"), st.sampled_from(TAG_NAMES), picks),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 5), min_size=1, max_size=3)),
    st.tuples(st.just("rename"), st.sampled_from(TAG_NAMES), st.sampled_from(TAG_NAMES)),
    st.tuples(st.just("tagdelete"), st.sampled_from(TAG_NAMES)),
    st.tuples(st.just("edit"), st.integers(0, 5), st.text(max_size=5)),
    st.tuples(st.just("dedupe")),  # site0 twice (http, www., a slash) is one page to dedupe
]
others = [
    st.tuples(
        st.just("add"), st.sampled_from(URLS), st.lists(st.sampled_from(TAG_NAMES), max_size=3)
    ),
    st.tuples(st.just("restore"), st.integers(0, 5)),
]
operations = st.lists(st.one_of(*changes, *others), max_size=12)


def _apply(library: Library, step: tuple) -> bool:
    """Run one operation; False when the library refused it (nothing changed)."""
    live = [b.id for b in library.iterate()]
    pick = lambda picks: [live[i % len(live)] for i in picks] if live else []  # noqa: E731
    try:
        match step:
            case ("add", url, tags):
                library.add(url, tags=tags)
            case ("tag", name, picks):
                library.tag_add(name, pick(picks))
            case ("untag", name, picks):
                library.tag_remove(name, pick(picks))
            case ("delete", picks):
                library.delete(pick(picks))
            case ("rename", old, new):
                library.tag_rename(old, new)
            case ("tagdelete", name):
                library.tag_delete(name)
            case ("edit", index, title):
                library.update(pick([index])[0], title=title, tags=["edited"])
            case ("dedupe",):
                if not merge_duplicates(library, duplicate_groups(library)):
                    return False
            case ("restore", index):
                held = [e.id for e in trash.entries(library)]
                trash.restore(library, [held[index % len(held)]] if held else [])
        return True
    except (MarksError, IndexError):
        return False


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=operations, change=st.one_of(*changes))
@example(history=[], change=("rename", "a", "c"))  # a plain rename, subtags along
@example(history=[], change=("rename", "c", "B"))  # a merge into an existing tag
@example(history=[], change=("rename", "äpfel", "ÄPFEL"))  # the case only
@example(history=[("delete", [0])], change=("rename", "B", "zzz"))
@example(history=[("add", URLS[5], ["c", "new"])], change=("dedupe",))
def test_undo_after_any_sequence_restores_the_exact_prior_content(
    tmp_path_factory, history, change
):
    store = Store(tmp_path_factory.mktemp("prop") / "library.db")
    library = Library(store)
    try:
        for number, url in enumerate(URLS[:3]):  # something to change from the start
            library.add(url, tags=TAG_NAMES[number * 2 : number * 2 + 2])
        for step in history:
            _apply(library, step)
        before = content(store)
        steps_before = store.value("SELECT max(id) FROM undo_steps")
        if not _apply(library, change):
            return  # refused (no such tag...): nothing changed, nothing to undo
        if store.value("SELECT max(id) FROM undo_steps") == steps_before:
            return  # an edit that changed nothing records no step
        trash.undo(library)
        event(f"undid {change[0]}")  # --hypothesis-show-statistics: which changes were undone
        assert content(store) == before
        if store.full_text():
            store.execute("INSERT INTO bookmarks_fts (bookmarks_fts) VALUES ('integrity-check')")
            store.execute(
                "INSERT INTO bookmarks_words (bookmarks_words) VALUES ('integrity-check')"
            )
    finally:
        store.close()


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_delete_trash_list_restore_undo_and_empty(marks):
    for url, title in (("https://a.example/", "Alpha"), ("https://b.example/", "Beta")):
        assert marks("bookmark", "add", url, "--title", title, "--tags", "t").code == 0
    assert marks("queue", "add", "1").code == 0
    deleted = marks("bookmark", "delete", "1", "2", "--yes")
    assert deleted.code == 0 and "deleted 2 bookmark(s)" in deleted.err

    listed = json.loads(marks("trash", "list", "-o", "json").out)
    assert [e["id"] for e in listed] == [2, 1] and listed[1]["rows"] == 4
    assert "Alpha" in marks("trash", "list").out

    restored = marks("trash", "restore", "1")
    assert restored.code == 0 and "restored 1 bookmark(s)" in restored.err
    assert json.loads(marks("queue", "list", "-o", "json").out)[0]["id"] == 1

    undone = marks("undo")
    assert undone.code == 0
    assert "undid delete (deleted 2 bookmark(s): 1 (Alpha), 2 (Beta))" in undone.err
    assert "restored 1 bookmark(s) from the trash" in undone.err  # 1 came back already
    assert [b["title"] for b in json.loads(marks("bookmark", "list", "-o", "json").out)] == [
        "Beta",
        "Alpha",
    ]

    again = marks("undo")
    assert again.code == 1 and again.err.startswith("marks: nothing to undo")
    assert marks("trash", "restore", "7").err == "marks: bookmark 7 is not in the trash\n"

    marks("bookmark", "delete", "2", "--yes")
    refused = marks("trash", "empty", input="")
    assert refused.code == 1 and "confirmation needed" in refused.err
    emptied = marks("trash", "empty", "--older-than", "1", "--yes")
    assert "removed 0 bookmark(s) for good" in emptied.err
    assert "removed 1 bookmark(s) for good" in marks("trash", "empty", "--yes").err
    assert marks("trash", "list", "-o", "json").out == "[]\n"
    assert marks("trash", "empty", "--older-than", "-1", "--yes").code == 2


def test_cli_undo_of_a_tag_rename_says_what_it_put_back(marks):
    marks("bookmark", "add", "https://a.example/", "--tags", "old/sub")
    marks("tag", "rename", "old", "new", "--yes")
    undone = marks("undo", "-o", "json")
    report = json.loads(undone.out)
    assert report["action"] == "tag rename" and report["changed"] == 1
    assert "put back the fields or tags of 1 bookmark(s)" in undone.err
    assert json.loads(marks("tag", "list", "-o", "json").out)[-1]["tag"] == "old/sub"


def test_cli_restore_of_a_url_added_again_says_both_are_kept(marks):
    marks("bookmark", "add", "https://same.example/", "--title", "first")
    marks("bookmark", "delete", "1", "--yes")
    marks("bookmark", "add", "https://same.example/", "--title", "second")
    restored = marks("trash", "restore", "1")
    assert restored.code == 0
    assert (
        "marks: bookmark 1 (https://same.example/) was bookmarked again meanwhile as 2: both "
        "are kept (`marks db dedupe` merges them)" in restored.err
    )
    assert len(json.loads(marks("bookmark", "list", "-o", "json").out)) == 2


def test_config_trash_days_is_a_known_setting(marks):
    assert marks("config", "set", "trash_days", "7").code == 0
    assert marks("config", "set", "trash_days", "-1").code == 1


# --- the shell --------------------------------------------------------------------------------


def test_shell_rm_trash_and_undo(marks):
    marks("bookmark", "add", "https://a.example/", "--title", "Alpha")
    marks("bookmark", "add", "https://b.example/", "--title", "Beta")
    run = marks("shell", "-c", "rm -f 1; trash; undo; ls /bookmarks")
    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0] == "deleted 1 bookmark(s)"
    assert lines[1].split()[0] == "1" and lines[1].endswith("Alpha")
    assert lines[2].startswith("undid delete (deleted 1 bookmark(s): 1 (Alpha))")
    assert [line.split()[0] for line in lines[3:]] == ["2", "1"]

    run = marks("shell", "-c", "cd /bookmarks/2; rm -f; trash restore 2; trash restore 9")
    assert run.code == 1 and "restored 1 bookmark(s)" in run.out
    assert "trash: bookmark 9 is not in the trash" in run.err
    run = marks("shell", "-c", "rm -f 2; trash empty")
    assert "not asked (no terminal): use trash empty -f" in run.err
    run = marks("shell", "-c", "trash empty -f --older-than 0; trash; undo")
    assert "removed 1 bookmark(s) for good" in run.out and "the trash is empty" in run.out
    # The deletes' bookmarks were restored by hand or are gone for good: nothing left to undo.
    assert "undo: nothing to undo" in run.err


def test_trash_and_undo_work_on_a_sqlite_without_fts5(marks):
    from support.nofts5 import without_fts5

    marks("bookmark", "add", "https://a.example/", "--title", "Narwhal", "--no-fetch")
    with without_fts5():
        assert marks("bookmark", "delete", "1", "--yes").code == 0
        assert json.loads(marks("trash", "list", "-o", "json").out)[0]["id"] == 1
        assert marks("undo").code == 0
        assert marks("bookmark", "delete", "1", "--yes").code == 0
        assert marks("trash", "restore", "1").code == 0
    # A SQLite with FTS5 rebuilds the index the other one could not keep: the bookmark is found.
    hits = json.loads(marks("-o", "json", "bookmark", "search", "--fts", "narwhal").out)
    assert [hit["id"] for hit in hits] == [1]
