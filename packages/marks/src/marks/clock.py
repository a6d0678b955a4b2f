"""Times in marks: UTC, timezone-aware in Python, ISO-8601 text with `Z` in the database.

Stored text always has second precision (`2026-01-02T03:04:05Z`) so that text order is time order.
"""

import datetime as dt

UTC = dt.UTC


def now() -> dt.datetime:
    return dt.datetime.now(UTC).replace(microsecond=0)


def to_text(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError("naive datetime: marks stores only timezone-aware UTC times")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_text(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def from_epoch(value: str | int | float | None) -> dt.datetime | None:
    """Browser timestamps: seconds, milliseconds or microseconds since 1970, by magnitude."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if number <= 0:
        return None
    if number > 1e14:
        number /= 1e6
    elif number > 1e11:
        number /= 1e3
    try:
        return dt.datetime.fromtimestamp(int(number), UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_user_date(text: str) -> dt.datetime:
    """A date a person typed: `2024`, `2024-05`, `2024-05-17`, or a full ISO time (UTC if bare)."""
    text = text.strip()
    try:
        if len(text) == 4 and text.isdigit():
            return dt.datetime(int(text), 1, 1, tzinfo=UTC)
        if len(text) == 7 and text[4] == "-":
            return dt.datetime(int(text[:4]), int(text[5:]), 1, tzinfo=UTC)
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"not a date: {text!r} (use YYYY, YYYY-MM, YYYY-MM-DD or ISO 8601)"
        ) from None
    return moment.replace(tzinfo=moment.tzinfo or UTC).astimezone(UTC)
