"""Which outputs of a finished run a job lists, and the log lines naming those it does not.

A pure step after the sandbox has collected the outputs, apart from the runner loop: names that
are not UTF-8 or that do not fit the listing's budget (`listing.LISTING_BYTES`) stay on disk,
unlisted, and the job's log says which and why, escaping only as much of each name as it shows.
"""

import os

from jobrunner.jobs import Job
from jobrunner.node.listing import LISTING_BYTES, ListingBudget
from jobrunner.sandbox import RunResult

_UNNAMED_ROOM = 256  # kept in the log for the line counting the outputs it could not name
# How much of a name a log line shows: its start and its end, so that the reason after it fits
# in a note (`jobs.NOTE_MAX`). Escaped whole, a name can be 16 KiB (4 per byte of a 4 KiB path),
# and escaping runs on the event loop: 1,100 such names took 3.5 s. Only what is shown is escaped.
_NAME_HEAD, _NAME_TAIL = 500, 200


def _shown(name: str) -> str:
    if len(name) <= _NAME_HEAD + _NAME_TAIL:
        return _cut(printable(name))
    return _cut(f"{printable(name[:_NAME_HEAD])}...{printable(name[-_NAME_TAIL:])}")


def _cut(shown: str) -> str:
    """At most a head and a tail of an escaped name (escapes take up to 10 characters)."""
    if len(shown) <= _NAME_HEAD + _NAME_TAIL + 3:
        return shown
    return f"{shown[:_NAME_HEAD]}...{shown[-_NAME_TAIL:]}"


def printable(path: str) -> str:
    """A job's file name as one safe line: undecodable bytes as \\xNN, controls escaped too."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def keep_outputs(job: Job, result: RunResult) -> str | None:
    """The outputs the wire can carry; the others are named in the log with why, as long as
    the log has room for them and for one line counting those it could not name. Outputs
    whose names do not fit the listing's budget (`listing.LISTING_BYTES`) fail the job
    `output_limit`, unless it failed already; the reason line is returned then."""
    job.outputs = {}
    unnamed = over_budget = 0
    budget = ListingBudget()
    for out in result.outputs:
        problem = out.problem
        if problem is None:
            try:
                out.path.encode("utf-8")
            except UnicodeEncodeError:
                problem = "its name is not valid UTF-8 (kept on disk, not listed)"
        if problem is None and not budget.admit(out.path):
            over_budget += 1
            problem = (
                f"the names listed before it fill the {LISTING_BYTES // 2**20} MiB that a "
                "job's listing may take (kept on disk, not listed)"
            )
        if problem is None:
            job.outputs[out.path] = out
        elif unnamed or not job.log.note(
            f"output {_shown(out.path)} not listed: {problem}",
            keep=_UNNAMED_ROOM,
        ):
            unnamed += 1
    unnamed += result.unlisted
    if unnamed:
        job.log.note(
            f"{unnamed} more output(s) not listed (not copied out, a directory not read, a "
            "name not UTF-8, or the listing full); the log names only the first ones"
        )
    if over_budget and job.failure is None:
        job.failure = "output_limit"
        return (
            f"{over_budget} output file(s) not listed: their names add up to more than the "
            f"{LISTING_BYTES // 2**20} MiB that a job's listing may take"
        )
    return None
