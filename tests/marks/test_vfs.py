"""The virtual filesystem's path mapping, without a terminal or a database."""

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from marks.vfs import PERIODS, TOP, PathError, normalise, period_range, resolve

UTC = dt.UTC
WEDNESDAY = dt.datetime(2026, 11, 18, 10, 30, tzinfo=UTC)


def test_paths_normalise_like_unix():
    assert normalise("/tags/dev", "..") == "/tags"
    assert normalise("/tags/dev", "../../../..") == "/"
    assert normalise("/tags", "./dev//python/") == "/tags/dev/python"
    assert normalise("/tags/dev", "/starred") == "/starred"


@given(
    st.lists(st.sampled_from(["..", ".", "a", "b", "", "12"]), max_size=8).map("/".join),
    st.sampled_from(["/", "/tags", "/tags/a/b"]),
)
def test_normalised_paths_are_absolute_and_clean(path, cwd):
    result = normalise(cwd, path)
    assert result.startswith("/") and "//" not in result
    assert all(part not in (".", "..") for part in result.split("/"))


def test_root_and_collections():
    assert resolve("/", "/", WEDNESDAY).subdirs.args == TOP
    assert resolve("/", "starred", WEDNESDAY).selection.where == "starred = 1"
    popular = resolve("/", "/popular", WEDNESDAY).selection
    assert popular.limit == 100 and popular.order.startswith("visit_count DESC")
    assert resolve("/starred", "12", WEDNESDAY).bookmark_id == 12
    with pytest.raises(PathError):
        resolve("/", "/nowhere", WEDNESDAY)
    with pytest.raises(PathError):
        resolve("/", "/starred/abc", WEDNESDAY)


def test_tags_nest_on_slashes():
    location = resolve("/tags", "dev/python", WEDNESDAY)
    assert location.tag == "dev/python" and location.selection.bindings == ("dev/python",)
    assert location.subdirs.args == ("dev/python",)


def test_weeks_start_on_monday_and_months_turn():
    monday = dt.datetime(2026, 11, 16, tzinfo=UTC)
    assert period_range("this-week", WEDNESDAY)[0] == monday
    assert period_range("last-week", WEDNESDAY) == (monday - dt.timedelta(days=7), monday)
    assert period_range("yesterday", WEDNESDAY) == (
        dt.datetime(2026, 11, 17, tzinfo=UTC),
        dt.datetime(2026, 11, 18, tzinfo=UTC),
    )
    # On the first of a month, last-month is the whole previous month.
    december = dt.datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert period_range("last-month", december) == (
        dt.datetime(2026, 11, 1, tzinfo=UTC),
        dt.datetime(2026, 12, 1, tzinfo=UTC),
    )
    # And across a year.
    new_year = dt.datetime(2027, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert period_range("last-month", new_year) == (
        dt.datetime(2026, 12, 1, tzinfo=UTC),
        dt.datetime(2027, 1, 1, tzinfo=UTC),
    )
    assert period_range("this-week", new_year)[0] == dt.datetime(2026, 12, 28, tzinfo=UTC)
    # A Sunday belongs to the week that began on the Monday before it.
    sunday = dt.datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC)
    assert period_range("this-week", sunday)[0] == monday


def test_other_timezones_are_read_in_utc():
    tokyo = dt.datetime(2026, 11, 19, 2, 0, tzinfo=dt.timezone(dt.timedelta(hours=9)))
    assert period_range("today", tokyo)[0] == dt.datetime(2026, 11, 18, tzinfo=UTC)


@pytest.mark.parametrize("period", PERIODS)
def test_every_period_has_three_activities(period):
    location = resolve("/", f"/recent/{period}", WEDNESDAY)
    assert location.subdirs.args == ("visited", "added", "starred")
    starred = resolve("/", f"/recent/{period}/starred", WEDNESDAY).selection
    assert "starred = 1" in starred.where and starred.where.startswith("added >=")


def test_by_date_levels_and_calendar():
    assert resolve("/", "/by-date", WEDNESDAY).subdirs.args == ("added", "visited")
    assert resolve("/", "/by-date/visited", WEDNESDAY).subdirs.args == ("last_visited", "")
    assert resolve("/", "/by-date/added/2024/02", WEDNESDAY).subdirs.args == ("added", "2024-02")
    day = resolve("/", "/by-date/added/2024/02/29", WEDNESDAY).selection
    assert day.bindings == ("2024-02-29T", "2024-02-29T~")
    assert resolve("/", "/by-date/added/2024/02/29/7", WEDNESDAY).bookmark_id == 7
    for bad in (
        "/by-date/added/2023/02/29",
        "/by-date/added/2024/13",
        "/by-date/added/24",
        "/by-date/removed",
    ):
        with pytest.raises(PathError):
            resolve("/", bad, WEDNESDAY)
