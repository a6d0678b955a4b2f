"""Any text a client sends as a filter or a search either runs or is a one-line Invalid error:
never a RecursionError or an SQLite "expression tree is too large" (which the server answered
with a 500). Property tests over the two query languages, against a real database."""

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marks import filters, limits
from marks.exceptions import Invalid

PIECES = ["(", ")", " ", "not ", "NOT ", "-", " or ", " OR ", " and ", " AND ", "starred",
          "tag:a", "#b", "url ~ x", "title = y", '"', "a", "b*", "domain:c.example"]  # fmt: skip


def _texts():
    piece = st.sampled_from(PIECES)
    short = st.lists(piece, max_size=40).map("".join)
    # Sizes: small ones, and the edges of the limits and far beyond (what a hostile client sends).
    depth = st.one_of(st.integers(0, 80), st.sampled_from([63, 64, 65, 300, 1000]))
    count = st.one_of(st.integers(1, 80), st.sampled_from([199, 200, 201, 600, 1500]))
    nested = st.tuples(depth, piece).map(lambda t: "(" * t[0] + t[1] + ")" * t[0])
    negated = st.tuples(depth, st.sampled_from(["not ", "NOT ", "-"])).map(
        lambda t: t[1] * t[0] + "starred"
    )
    chained = st.tuples(count, st.sampled_from([" or ", " OR ", " "])).map(
        lambda t: t[1].join(["starred" if "o" in t[1] else "a"] * t[0])
    )
    return st.one_of(short, nested, negated, chained)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_texts())
def test_a_filter_runs_or_is_invalid(library, text):
    try:
        where, bindings = filters.compile_filter(text)
    except Invalid:
        return
    library.list_bookmarks(where=where, bindings=bindings, limit=1)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_texts())
def test_a_search_runs_or_is_invalid(library, text):
    for fts in (True, False):
        with contextlib.suppress(Invalid):
            library.search(text, fts=fts, limit=1)


def test_the_limits_are_generous_for_people(library):
    deep = "(" * (limits.QUERY_NESTING - 1) + "starred" + ")" * (limits.QUERY_NESTING - 1)
    for text in (deep, " or ".join(["starred"] * limits.QUERY_TERMS)):
        where, bindings = filters.compile_filter(text)
        library.list_bookmarks(where=where, bindings=bindings)
    library.search(" OR ".join(["word"] * limits.QUERY_TERMS), fts=True)
    with pytest.raises(Invalid):
        filters.compile_filter(" or ".join(["starred"] * (limits.QUERY_TERMS + 1)))
