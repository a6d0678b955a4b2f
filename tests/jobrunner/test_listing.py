"""What a job's outputs cost in its answers: names are charged as JSON writes them, so `/status`
and `/outputs` stay within the listing's budget whatever the names (issue 22's third review)."""

from urllib.parse import quote

import httpx
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.node.listing import LISTING_BYTES, ListingBudget, listing
from jobrunner.wire import OutputFile
from support.jobclient import log_of, run_job

# Names of control characters (six bytes each in JSON), ordinary ones, and non-ASCII ones.
segments = st.text(st.sampled_from(["\x01", "a", "é", "\u202e", "b"]), min_size=1, max_size=12)
paths = st.lists(segments, min_size=1, max_size=6).map("/".join)


@given(st.lists(paths, max_size=60, unique=True), st.integers(200, 6000))
def test_what_is_admitted_fits_both_answers_within_the_budget(candidates, limit):
    budget = ListingBudget(limit)
    admitted = [path for path in sorted(candidates) if budget.admit(path)]
    record_files = {path: OutputFile(path, 123456789, "f" * 64) for path in admitted}
    listed = listing((path, 123456789) for path in admitted)
    spent = len(msgspec.json.encode(record_files)) + len(msgspec.json.encode(listed))
    assert spent <= limit


def test_a_path_that_does_not_fit_charges_nothing():
    budget = ListingBudget(1000)
    assert not budget.admit("x" * 2000)
    assert budget.left == 1000 and budget.admit("x")


# 1,000 outputs 14 directories deep, every name 250 U+0001 characters: a 45 MB record and a
# listing of tens of MB before, encoded again for every request on the event loop.
CONTROL_NAMES = """
import os
name = '\\x01' * 250
fd = os.open('.', os.O_RDONLY)
for level in range(14):
    os.mkdir(name, dir_fd=fd)
    inner = os.open(name, os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = inner
for i in range(1000):
    os.close(os.open(('%04d' % i) + '\\x01' * 246, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
"""


def test_answers_stay_within_the_listing_budget_whatever_the_names(server):
    record = run_job(server.url, CONTROL_NAMES)
    assert record["status"] == "failed" and record["failure"] == "output_limit"
    listed = record["output_files"]
    assert 0 < len(listed) < 1000
    status = httpx.get(f"{server.url}/status/{record['job_id']}")
    outputs = httpx.get(f"{server.url}/outputs/{record['job_id']}")
    assert len(status.content) + len(outputs.content) <= LISTING_BYTES + 4096  # the other fields
    assert len(outputs.json()["outputs"]) > len(listed)  # the files and their directories
    log = log_of(server.url, record["job_id"])
    assert "the names listed before it fill the 2 MiB" in log
    last = log.rstrip("\n").rsplit("\n", 1)[-1]
    assert "not listed: their names add up to more than the 2 MiB" in last
    first = quote(sorted(listed)[0], safe="/")
    assert httpx.get(f"{server.url}/download/{record['job_id']}/{first}").status_code == 200
