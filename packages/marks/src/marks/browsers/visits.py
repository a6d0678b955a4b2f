"""What every browser reader yields from its history: one row per page."""

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Visit:
    url: str
    title: str
    count: int  # a field, not a tuple: `count` would shadow tuple.count
    last: dt.datetime | None
