"""What every browser reader yields from its history: one row per page."""

import datetime as dt
from typing import NamedTuple


class Visit(NamedTuple):
    url: str
    title: str
    count: int
    last: dt.datetime | None
