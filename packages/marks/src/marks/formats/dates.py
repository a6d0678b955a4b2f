"""Dates as producers write them: ISO 8601, RFC 2822, and epochs in s, ms, µs (or Chrome's µs
since 1601). Each parser returns None for "no date" and raises ValueError for "unreadable"."""

import datetime as dt
import email.utils
import re

UTC = dt.UTC
# Microseconds between 1601-01-01 (Windows/Chrome epoch) and 1970-01-01.
CHROME_OFFSET_US = 11_644_473_600_000_000
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
EARLIEST = dt.datetime(1980, 1, 1, tzinfo=UTC)  # before this, a "date" is a mistake (or 0)
_EARLIEST_SECONDS = int(EARLIEST.timestamp())


def from_epoch(value: float) -> dt.datetime:
    """Seconds, milliseconds or microseconds since 1970, told apart by magnitude."""
    number = float(value)
    if number > 1e14:
        number /= 1e6
    elif number > 1e11:
        number /= 1e3
    try:
        moment = dt.datetime.fromtimestamp(int(number), UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"timestamp out of range: {value}") from None
    if moment < EARLIEST:
        raise ValueError(f"timestamp before 1980: {value}")
    return moment


def from_chrome(value: str | int) -> dt.datetime | None:
    """Chrome's `date_added`: microseconds since 1601-01-01 UTC; "0" means none."""
    number = int(value)
    if number == 0:
        return None
    return from_epoch((number - CHROME_OFFSET_US) / 1e6)


def parse(value: object) -> dt.datetime | None:
    """Any date a producer writes; None for a missing one, ValueError for an unreadable one."""
    if isinstance(value, str) and len(value) == 10 and value.isdigit() and value.isascii():
        seconds = int(value)  # the common case, epoch seconds: what the general rules give
        if seconds >= _EARLIEST_SECONDS:
            return dt.datetime.fromtimestamp(seconds, UTC)
    if value is None or value == "" or value is False:
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a date: {value!r}")
    if isinstance(value, int | float):
        return None if value == 0 else from_epoch(value)
    if not isinstance(value, str):
        raise ValueError(f"not a date: {value!r}")
    text = value.strip()
    if not text:
        return None
    if text.isdigit() and text.isascii():  # the common case: epoch seconds (or ms, µs)
        return None if int(text) == 0 else from_epoch(int(text))
    if _NUMBER.fullmatch(text):
        return None if float(text) == 0 else from_epoch(float(text))
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace(" UTC", "+00:00"))
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"unreadable date {text[:40]!r}") from None
    return moment.replace(tzinfo=moment.tzinfo or UTC).astimezone(UTC).replace(microsecond=0)


def parse_into(value: object, notes: list[str], what: str = "date") -> dt.datetime | None:
    """`parse`, with an unreadable date noted instead of raised."""
    try:
        return parse(value)
    except ValueError as error:
        notes.append(f"{what}: {error}")
        return None
