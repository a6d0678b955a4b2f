"""marks: `queue next` and `queue stats` as whole commands at 100k bookmarks with 10k queued."""

import random
import sys
import tempfile
from pathlib import Path

from bench_marks import MARKS, median_seconds
from bytecode import compile_marks
from run import Row

BOOKMARKS = 100_000
QUEUED = 10_000


def _library(db: Path) -> None:
    """Fill the database through the service layer (the way the CLI would), once."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "packages" / "marks" / "src"))
    from marks import importing
    from marks.library import Library, Record
    from marks.queue import ReadingQueue
    from marks.store import Store

    store = Store(db)
    library = Library(store)
    records = (Record(url=f"https://site{n % 2000}.example/page/{n}") for n in range(BOOKMARKS))
    importing.import_records(library, records)
    chosen = random.Random(7).sample(range(1, BOOKMARKS + 1), QUEUED)
    queue = ReadingQueue(store)
    for level in range(1, 6):
        queue.add(chosen[level - 1 :: 5], priority=level)
    for bookmark_id in chosen[:3000]:
        queue.set_progress(bookmark_id, random.Random(bookmark_id).choice([10, 50, 100]))
    store.close()


def run() -> list[Row]:
    compile_marks()  # whole commands, timed as a user's install runs them
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "queue.db"
        _library(db)
        rows = []
        for command in ("next", "stats"):
            seconds = median_seconds([MARKS, "--db", str(db), "queue", command])
            rows.append(
                Row(
                    f"queue {command}, 100k bookmarks, 10k queued (whole command)",
                    seconds * 1000,
                    "ms",
                    150,
                )
            )
    return rows
