"""Output patterns (path handling) and the output-count limit."""

import re

from hypothesis import given
from hypothesis import strategies as st

from jobrunner.sandbox.workdir import matcher, pattern_regex
from support.jobclient import run_job


def test_pattern_semantics():
    cases = {
        "**": (["a", "a/b/c"], []),
        "*.txt": (["a.txt"], ["d/a.txt", "a.txt.bak"]),
        "out/": (["out/a", "out/b/c"], ["out", "outx/a"]),
        "out/**/*.csv": (["out/a.csv", "out/x/y/a.csv"], ["out/a.txt", "a.csv"]),
        "?.log": (["a.log"], ["ab.log", "/.log"]),
        "a+b(c).txt": (["a+b(c).txt"], ["aab(c).txt"]),
    }
    for pattern, (matching, other) in cases.items():
        assert all(pattern_regex(pattern).fullmatch(p) for p in matching), pattern
        assert not any(pattern_regex(pattern).fullmatch(p) for p in other), pattern


names = st.text(st.characters(exclude_characters="/\x00"), min_size=1, max_size=6)


@given(st.lists(names, min_size=1, max_size=4).map("/".join))
def test_double_star_matches_every_path_and_literals_match_themselves(path):
    assert matcher(["**"])(path)
    assert pattern_regex(re.sub(r"[*?]", "_", path)).fullmatch(re.sub(r"[*?]", "_", path))


@given(st.lists(names, min_size=2, max_size=4))
def test_single_star_never_crosses_a_slash(parts):
    assert not pattern_regex("*").fullmatch("/".join(parts))


def test_too_many_outputs_fails_with_output_limit_and_keeps_the_first(server):
    record = run_job(server.url, "for i in range(1200):\n    open(f'f{i:04d}', 'w').write('x')\n")
    assert record["status"] == "failed" and record["failure"] == "output_limit"
    assert len(record["output_files"]) == 1000
    assert "f0000" in record["output_files"] and "f1199" not in record["output_files"]
