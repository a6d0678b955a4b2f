"""The browsers' clocks, to timezone-aware UTC (None for zero, missing or absurd values)."""

import datetime as dt

UTC = dt.UTC
_1601 = dt.datetime(1601, 1, 1, tzinfo=UTC)
_1970 = dt.datetime(1970, 1, 1, tzinfo=UTC)
_2001 = dt.datetime(2001, 1, 1, tzinfo=UTC)


def _after(epoch: dt.datetime, value, unit: str) -> dt.datetime | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not number > 0:
        return None
    try:
        return (epoch + dt.timedelta(**{unit: number})).replace(microsecond=0)
    except OverflowError:
        return None


def chromium(value) -> dt.datetime | None:
    """Microseconds since 1601-01-01 (Chromium's Bookmarks and History)."""
    return _after(_1601, value, "microseconds")


def firefox(value) -> dt.datetime | None:
    """Microseconds since 1970-01-01 (Firefox's places.sqlite)."""
    return _after(_1970, value, "microseconds")


def safari(value) -> dt.datetime | None:
    """Seconds since 2001-01-01 (Safari's History.db, Apple's Core Data epoch)."""
    return _after(_2001, value, "seconds")


def to_chromium(moment: dt.datetime) -> int:
    return int((moment - _1601).total_seconds() * 1_000_000)


def to_firefox(moment: dt.datetime) -> int:
    return int((moment - _1970).total_seconds() * 1_000_000)


def to_safari(moment: dt.datetime) -> float:
    return (moment - _2001).total_seconds()
