"""Ranked full-text search and the index that follows every change."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marks import importing
from marks.library import Invalid, Library
from marks.store import Store

MEMORY = Library(Store(":memory:"))
MEMORY.add("https://a.example", title="a b", tags=["a/b"])


@pytest.fixture
def filled(library):
    add = library.add
    add(
        "https://python.org",
        title="Python programming language",
        description="Running scripts quickly",
        tags=["dev/python"],
    )
    add(
        "https://rust-lang.org",
        title="Rust language",
        description="fearless concurrency",
        tags=["dev/rust"],
    )
    add("https://cafe.example", title="Café Central", description="coffee in Vienna", tags=["food"])
    add(
        "https://blog.example/python-tips",
        title="Tips",
        description="python python python",
        tags=["reading"],
    )
    add("https://news.example", title="News of the day", tags=["reading/later"])
    return library


def ids(library, query: str) -> list[int]:
    return [hit.bookmark.id for hit in library.search(query, fts=True)]


def test_words_prefix_phrase_and_operators(filled):
    assert set(ids(filled, "language")) == {1, 2}
    assert ids(filled, "lang*") == ids(filled, "language")
    assert ids(filled, '"programming language"') == [1]
    assert ids(filled, '"language programming"') == []
    assert set(ids(filled, "python AND language")) == {1}
    assert set(ids(filled, "rust OR coffee")) == {2, 3}
    assert set(ids(filled, "language NOT rust")) == {1}
    assert set(ids(filled, "language -rust")) == {1}
    assert set(ids(filled, "(rust OR coffee) AND vienna")) == {3}
    assert set(ids(filled, "python and")) == set()  # lower-case `and` is a word


def test_field_filters_and_hierarchical_tags(filled):
    assert ids(filled, "title:rust") == [2]
    assert ids(filled, "url:rust") == [2]
    assert set(ids(filled, "#dev")) == {1, 2}
    assert ids(filled, "#dev/rust") == [2]
    assert set(ids(filled, "tag:reading")) == {4, 5}
    assert ids(filled, "#reading -#reading/later") == [4]
    assert ids(filled, "#dev python") == [1]
    assert set(ids(filled, "NOT #dev")) == {3, 4, 5}


def test_stemming_and_diacritics(filled):
    assert ids(filled, "run") == [1]  # finds "Running"
    assert ids(filled, "cafe") == [3]  # finds "Café"
    assert ids(filled, "CAFÉ") == [3]


def test_ranking_puts_the_title_match_first(filled):
    hits = filled.search("python", fts=True)
    assert [hit.bookmark.id for hit in hits][:2] == [1, 4]
    assert hits[0].score > hits[1].score
    assert "[Python]" in hits[0].snippet


@pytest.mark.parametrize(
    "query",
    ['"unterminated', "(python", "python)", "AND", "OR rust", "NOT", "", "   ", "title:", "#", "*"],
)
def test_bad_syntax_is_one_clear_line(filled, query):
    with pytest.raises(Invalid) as error:
        filled.search(query, fts=True)
    assert str(error.value) and "\n" not in str(error.value)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*'ab "()*#-:', " ", " ", "AND", "OR", "NOT", "title", "tag"]), max_size=16
    ).map("".join)
)
def test_any_query_searches_or_fails_cleanly(query):
    try:
        MEMORY.search(query, fts=True)
    except Invalid as error:
        assert str(error) and "\n" not in str(error)


def test_index_follows_every_change(filled):
    assert ids(filled, "tokio") == []
    filled.update(2, description="async with tokio")
    assert ids(filled, "tokio") == [2]
    filled.update(2, title="Rustacean station", url="https://rustacean.example")
    assert ids(filled, "title:rustacean") == [2] and ids(filled, "title:language") == [1]
    filled.tag_add("systems", [2])
    assert ids(filled, "systems") == [2] and ids(filled, "#systems") == [2]
    filled.tag_rename("systems", "lowlevel")
    assert ids(filled, "systems") == [] and ids(filled, "lowlevel") == [2]
    filled.tag_remove("lowlevel", [2])
    assert ids(filled, "lowlevel") == []
    filled.delete([2])
    assert ids(filled, "tokio") == []
    # The index agrees with the table it indexes.
    filled.store.execute(
        "INSERT INTO bookmarks_fts (bookmarks_fts, rank) VALUES ('integrity-check', 1)"
    )


def test_substring_search_without_fts(filled):
    found = [hit.bookmark.id for hit in filled.search("LANG", fts=False)]
    assert set(found) == {1, 2}
    assert [h.bookmark.id for h in filled.search("100%", fts=False)] == []
    assert [h.bookmark.id for h in filled.search("reading/later", fts=False)] == [5]


def test_prefix_matches_words_as_written_not_only_stems(library):
    # The porter index holds "program" for "Programming": `programm*` used to find nothing.
    library.add("https://a.example", title="Programming in Python")
    library.add("https://b.example", title="Notes", description="programmers at work")
    library.add("https://c.example", title="Program guide")
    assert set(ids(library, "programm*")) == {1, 2}
    assert set(ids(library, "program*")) == {1, 2, 3}
    assert ids(library, "title:programm*") == [1]
    assert ids(library, "programm* -python") == [2]
    assert set(ids(library, "programm* OR guide")) == {1, 2, 3}
    # stemming still applies to whole words alongside prefixes ("programs" -> "program")
    assert set(ids(library, "programs")) == {1, 3}
    assert ids(library, "pyth* programming") == [1]


def test_prefix_ranking_keeps_the_title_above_the_body(library):
    library.add("https://body.example", title="Notes", description="Programming every day")
    library.add("https://title.example", title="Programming", description="notes")
    assert ids(library, "programm*") == [2, 1]
    assert ids(library, "programm* notes") == [2, 1]


def test_prefix_index_follows_changes_and_imports(library):
    from marks.wire import Bookmark

    importing.import_records(
        library, [Bookmark(url="https://imported.example", title="Programmable")]
    )
    assert ids(library, "programma*") == [1]
    library.update(1, title="Configurable")
    assert ids(library, "programma*") == []
    assert ids(library, "configura*") == [1]
    library.delete([1])
    assert ids(library, "configura*") == []


def test_minus_excludes_words_phrases_and_tags(filled):
    assert ids(filled, "language -rust") == [1]
    assert set(ids(filled, "python -#reading")) == {1}
    assert set(ids(filled, 'language -"fearless concurrency"')) == {1}


def test_shell_words_keep_their_phrases():
    from marks.query import quote_words

    assert quote_words(["a phrase", "word"]) == '"a phrase" word'
    assert quote_words(["tag:two words", "-a b", "#x y"]) == 'tag:"two words" -"a b" #"x y"'
    assert quote_words(['"already"', "prefix*"]) == '"already" prefix*'


shell_words = st.lists(
    st.one_of(
        st.text(st.characters(exclude_characters='"\x00'), min_size=1, max_size=12),
        st.sampled_from(["-x", "#a b", "tag:c d", "title:e f", "OR", "(", ")", "p*", "-"]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(shell_words)
def test_shell_words_parse_or_fail_cleanly_and_spaces_make_phrases(words):
    from marks.query import QueryError, Text, parse, quote_words

    text = quote_words(words)
    try:
        tree = parse(text)
    except QueryError:
        return
    spaced = [
        w for w in words if " " in w.strip() and not w.startswith(("#", "tag:", "-", "title:"))
    ]
    if len(words) == 1 and spaced and spaced[0].strip():
        assert tree == Text(spaced[0], phrase=True)
    try:  # whatever parses, the database answers, or refuses in one line (lone surrogates)
        MEMORY.search(text, fts=True)
    except Invalid as error:
        assert "\n" not in str(error) and "not valid Unicode" in str(error)


def test_a_common_word_ranks_its_newest_hits_and_lists_every_older_one(library):
    # The pool of ranked hits is RANKED_HITS (10,000) in use; 3 here stands for it, so six
    # bookmarks show what a word in a fifth of a million does.
    from marks.search import full_text

    library.add("https://old.example/kernel", title="Kernel")  # the best match, and the oldest
    for n in range(2, 7):
        library.add(f"https://example.com/{n}", title=f"notes {n}", description="kernel")
    library.add("https://new.example", title="Kernel tuning for servers")  # id 7: newest

    pooled = full_text(library.store, "kernel", None, ranked=3)
    assert [hit.bookmark.id for hit in pooled] == [7, 6, 5, 4, 3, 2, 1]  # nothing left out
    assert [hit.score is None for hit in pooled] == [False] * 3 + [True] * 4
    assert pooled[0].score > pooled[1].score  # the title match leads the ranked ones
    assert all(hit.snippet and "[kernel]" in hit.snippet.lower() for hit in pooled)
    assert [hit.bookmark.id for hit in full_text(library.store, "kernel", 2, ranked=3)] == [7, 6]

    # A word with fewer hits than the pool ranks all of them, as before.
    everything = full_text(library.store, "kernel", None, ranked=7)
    assert [hit.bookmark.id for hit in everything][:2] == [1, 7]
    assert all(hit.score is not None for hit in everything)
    assert [hit.bookmark.id for hit in library.search("kernel", fts=True)] == [
        hit.bookmark.id for hit in everything
    ]


def test_every_hit_has_its_snippet_past_sqlites_limit_of_variables(library):
    # `find` in the shell asks for every hit: at a million bookmarks, `kernel` has 187,106 and
    # the snippets took one SQL variable per hit, past SQLite's 32,766 ("too many SQL
    # variables"). The limit is lowered here so that 40 hits pass it.
    import apsw

    for n in range(40):
        library.add(f"https://example.com/{n}", title=f"kernel notes {n}")
    library.store.db.limit(apsw.SQLITE_LIMIT_VARIABLE_NUMBER, 20)
    hits = library.search("kernel", fts=True, limit=None)
    assert len(hits) == 40
    assert all(hit.snippet and "[kernel]" in hit.snippet for hit in hits)


def test_a_tag_takes_its_subtags_and_none_of_its_neighbours(library):
    # `#dev` is read as a range of tag keys (`dev` up to `dev0`): what lies in the range but is
    # neither `dev` nor under `dev/` stays out, and LIKE's wildcards never were a tag's.
    names = ["dev", "Dev/Rust", "dev/py/3", "dev-tools", "dev.x", "dev0", "devx/y", "de", "d_v/a"]
    ids = {
        name: library.add(f"https://example.com/{n}", tags=[name]).id
        for n, name in enumerate(names)
    }

    def tagged(query: str) -> set[str]:
        found = {hit.bookmark.id for hit in library.search(query, fts=True)}
        return {name for name, bookmark_id in ids.items() if bookmark_id in found}

    assert tagged("#dev") == {"dev", "Dev/Rust", "dev/py/3"}
    assert tagged("#DEV/rust") == {"Dev/Rust"}
    assert tagged("#dev/py") == {"dev/py/3"}
    assert tagged("#d_v") == {"d_v/a"}
    assert tagged("#d%v") == set()
    listed = library.list_bookmarks(tag="dev")
    assert {bookmark.id for bookmark in listed} == {ids["dev"], ids["Dev/Rust"], ids["dev/py/3"]}


WORDS = ["kernel", "python", "rust", "notes", "kernels"]
titles = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(
    library_titles=st.lists(st.tuples(titles, titles), min_size=1, max_size=14),
    query=st.sampled_from(
        [
            "kernel",
            "kernel python",
            "kernel OR rust",
            '"kernel python"',
            "ker*",
            "kernel -rust",
            "title:python",
            "python NOT notes",
        ]
    ),
    ranked=st.integers(1, 16),
)
def test_every_page_is_the_head_of_the_whole_answer(library_titles, query, ranked):
    # A page no longer than the ranked pool is ranked by a statement of its own (the pool
    # streamed into the page's sort); a longer one, or every hit, by the pooled statement with
    # the unranked older hits after it. The page must be the whole answer's head: the same
    # bookmarks in the same order with the same scores and snippets, at every length.
    from marks.search import full_text

    library = Library(Store(":memory:"))
    for n, (title, description) in enumerate(library_titles):
        library.add(f"https://example.com/{n}", title=title, description=description)
    whole = [
        (h.bookmark.id, h.score, h.snippet) for h in full_text(library.store, query, None, ranked)
    ]
    for limit in range(1, len(whole) + 2):
        page = full_text(library.store, query, limit, ranked)
        assert [(h.bookmark.id, h.score, h.snippet) for h in page] == whole[:limit]
    assert [hit[1] is None for hit in whole] == sorted(hit[1] is None for hit in whole)


def test_a_search_command_loads_no_dataclasses(library, db_path, tmp_path):
    # The query tree's five nodes were frozen dataclasses: `dataclasses` and about 4 million
    # instructions per class on every `bookmark search`, where the command itself ranks a rare
    # word in a few million. The command runs in a new interpreter, as `marks` does.
    library.add("https://example.org/kernel", title="Kernel notes")
    report = tmp_path / "modules.json"
    script = (
        "import json, os, sys\n"
        "from marks.cli import main\n"
        "sys.argv = ['marks', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    with open(os.environ['LOADED_MODULES'], 'w') as handle:\n"
        "        json.dump(sorted(sys.modules), handle)\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "--db",
            str(db_path),
            "bookmark",
            "search",
            "--fts",
            "kernel",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LOADED_MODULES": str(report)},
    )
    assert done.returncode == 0, done.stderr
    assert "Kernel notes" in done.stdout
    modules = set(json.loads(report.read_text()))
    assert "marks.query" in modules and "dataclasses" not in modules


def test_query_nodes_are_values():
    # The nodes were frozen dataclasses; as plain classes they still compare by kind and
    # fields, hash alike when equal, show their fields, and cannot be changed.
    from marks.query import And, Not, Or, Tag, Text, parse

    assert parse('a "b c" OR -#x') == Or(
        (And((Text("a"), Text("b c", phrase=True))), Not(Tag("x")))
    )
    assert Text("a") != Tag("a") and And((Text("a"),)) != Or((Text("a"),))
    assert Text("a", prefix=True) != Text("a") and Text("a", field="url") != Text("a")
    assert hash(Text("a", True, False, "title")) == hash(Text("a", phrase=True, field="title"))
    assert len({Tag("x"), Tag("x"), Not(Tag("x"))}) == 2
    assert repr(Text("a")) == "Text(words='a', phrase=False, prefix=False, field=None)"
    with pytest.raises(AttributeError):
        Text("a").words = "b"  # type: ignore[misc]
