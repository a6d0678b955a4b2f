"""The browsers' clocks, to timezone-aware UTC (None for zero, missing or absurd values)."""

import datetime as dt

UTC = dt.UTC
_1601 = dt.datetime(1601, 1, 1, tzinfo=UTC)
_1970 = dt.datetime(1970, 1, 1, tzinfo=UTC)
_2001 = dt.datetime(2001, 1, 1, tzinfo=UTC)

# What the browsers store a time as: an integer or a real in SQLite, a digit string in Chromium's
# JSON, or nothing.
Stamp = int | float | str | bytes | None


def _after(epoch: dt.datetime, value: Stamp, per_second: int) -> dt.datetime | None:
    if value is None:
        return None
    try:  # exact for integers and digit strings (floats lose microseconds past 2**53)
        number = value if isinstance(value, int) else int(value)
    except (TypeError, ValueError):
        try:
            number = int(float(value))
        except (TypeError, ValueError, OverflowError):
            return None
    seconds = number // per_second
    if seconds <= 0:
        return None
    try:
        return epoch + dt.timedelta(seconds=seconds)
    except OverflowError:
        return None


def chromium(value: Stamp) -> dt.datetime | None:
    """Microseconds since 1601-01-01 (Chromium's Bookmarks and History)."""
    return _after(_1601, value, 1_000_000)


def firefox(value: Stamp) -> dt.datetime | None:
    """Microseconds since 1970-01-01 (Firefox's places.sqlite)."""
    return _after(_1970, value, 1_000_000)


def safari(value: Stamp) -> dt.datetime | None:
    """Seconds since 2001-01-01 (Safari's History.db, Apple's Core Data epoch)."""
    return _after(_2001, value, 1)


def to_chromium(moment: dt.datetime) -> int:
    return int((moment - _1601).total_seconds() * 1_000_000)


def to_firefox(moment: dt.datetime) -> int:
    return int((moment - _1970).total_seconds() * 1_000_000)


def to_safari(moment: dt.datetime) -> float:
    return (moment - _2001).total_seconds()
