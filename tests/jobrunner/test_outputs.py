"""Output patterns (path handling) and the output-count limit."""

import functools
import os
import re
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.jobs import LOG_SLACK
from jobrunner.sandbox.workdir import MAX_PROBLEMS, Patterns, collect
from support.jobclient import log_of, run_job, submit


def matches(pattern: str, path: str) -> bool:
    return Patterns([pattern]).matches(path)


def test_pattern_semantics():
    cases = {
        "**": (["a", "a/b/c"], []),
        "*.txt": (["a.txt"], ["d/a.txt", "a.txt.bak"]),
        "out/": (["out/a", "out/b/c"], ["out", "outx/a"]),
        "out/**/*.csv": (["out/a.csv", "out/x/y/a.csv"], ["out/a.txt", "a.csv"]),
        "**/x": (["x", "a/x", "a/b/x"], ["ax", "a/bx"]),
        "a**/x": (["ax", "a/x", "ab/x", "a/b/x", "ab/c/x"], ["x", "b/x", "axy"]),
        "?.log": (["a.log"], ["ab.log", "/.log"]),
        "a+b(c).txt": (["a+b(c).txt"], ["aab(c).txt"]),
    }
    for pattern, (matching, other) in cases.items():
        assert all(matches(pattern, p) for p in matching), pattern
        assert not any(matches(pattern, p) for p in other), pattern


names = st.text(st.characters(exclude_characters="/\x00"), min_size=1, max_size=6)


@given(st.lists(names, min_size=1, max_size=4).map("/".join))
def test_double_star_matches_every_path_and_literals_match_themselves(path):
    assert matches("**", path)
    assert matches(re.sub(r"[*?]", "_", path), re.sub(r"[*?]", "_", path))


@given(st.lists(names, min_size=2, max_size=4))
def test_single_star_never_crosses_a_slash(parts):
    assert not matches("*", "/".join(parts))


def reference(pattern: str, path: str) -> bool:
    """The glob semantics as plain recursion over the pattern text (memoised: small inputs)."""
    if pattern.endswith("/"):
        pattern += "**"

    @functools.cache
    def match(p: int, n: int) -> bool:
        if p == len(pattern):
            return n == len(path)
        if pattern.startswith("**/", p):  # nothing, or anything up to and including a `/`
            return match(p + 3, n) or any(
                path[i] == "/" and match(p + 3, i + 1) for i in range(n, len(path))
            )
        if pattern.startswith("**", p):
            return any(match(p + 2, i) for i in range(n, len(path) + 1))
        if pattern[p] == "*":
            return match(p + 1, n) or (n < len(path) and path[n] != "/" and match(p, n + 1))
        if n == len(path):
            return False
        if pattern[p] == "?":
            return path[n] != "/" and match(p + 1, n + 1)
        return pattern[p] == path[n] and match(p + 1, n + 1)

    return match(0, 0)


pattern_pieces = st.sampled_from(["a", "b", "/", "*", "?", "**", "**/"])
patterns = st.builds(
    lambda pieces, slash: "".join(pieces) + slash,
    st.lists(pattern_pieces, min_size=1, max_size=8),
    st.sampled_from(["", "/"]),
)
paths = st.text(st.sampled_from("ab/*?"), max_size=10)


@given(st.lists(patterns, min_size=1, max_size=3), paths)
def test_the_matcher_agrees_with_the_plain_recursion(pattern_list, path):
    assert Patterns(pattern_list).matches(path) == any(reference(p, path) for p in pattern_list)


@given(st.lists(patterns, min_size=1, max_size=3), st.lists(paths, max_size=6))
def test_carrying_on_from_a_directory_state_is_matching_the_whole_path(pattern_list, parts):
    wanted = Patterns(pattern_list)
    state = wanted.start
    for part in parts:
        state = wanted.advance(state, part)
    assert wanted.accepts(state) == wanted.matches("".join(parts))


# Each `**` was a `.*` of one regex: on a name of `a`s without the `c`, the regex tried every
# way to split it, about n^8 / 8! steps (13.6 s at n = 70), in one C call holding the GIL.
PATHOLOGICAL = "**a" * 7 + "**c"


@pytest.mark.timeout(20)  # the old matcher takes hours on these names
def test_pathological_patterns_match_in_linear_time():
    wanted = Patterns([PATHOLOGICAL, "?" * 255 + "**" * 300 + "c", "**/" * 340 + "c"])
    for name in ["a" * 255, ("a" * 255 + "/") * 16, "a/" * 2000]:
        assert not wanted.matches(name)
        assert wanted.matches(name + "c")


@pytest.mark.timeout(300)
def test_a_pathological_pattern_never_stops_the_server_while_outputs_are_copied(server):
    code = "open('a' * 200, 'w').write('x')\nopen('result.txt', 'w').write('done')\n"
    response = submit(
        server.url, {"main.py": code}, {"entrypoint": "main.py", "outputs": [PATHOLOGICAL, "r*"]}
    )
    assert response.status_code == 200, response.text
    job_id = response.json()["job_id"]
    deadline = time.monotonic() + 120
    answers = 0
    with httpx.Client(timeout=30) as other_client:  # its own connection, as another client's
        while True:
            try:
                record = other_client.get(f"{server.url}/status/{job_id}").json()
                health = other_client.get(f"{server.url}/health")
            except httpx.TimeoutException:
                pytest.fail(f"the server stopped answering (after {answers} answers)")
            assert health.status_code == 200 and health.json()["status"] == "healthy"
            answers += 1
            if record["status"] in ("completed", "failed"):
                break
            assert time.monotonic() < deadline, f"job {job_id} did not finish"
    assert record["status"] == "completed", log_of(server.url, job_id)
    assert list(record["output_files"]) == ["result.txt"]


def test_too_many_outputs_fails_with_output_limit_and_keeps_the_first(server):
    record = run_job(server.url, "for i in range(1200):\n    open(f'f{i:04d}', 'w').write('x')\n")
    assert record["status"] == "failed" and record["failure"] == "output_limit"
    assert len(record["output_files"]) == 1000
    assert "f0000" in record["output_files"] and "f1199" not in record["output_files"]
