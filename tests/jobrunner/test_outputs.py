"""Output patterns (path handling) and the output-count limit."""

import functools
import hashlib
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


def test_as_many_outputs_as_allowed_and_an_unchanged_input_after_them_completes(server):
    # main.py comes after the outputs in path order; it is no output, so not one too many.
    record = run_job(server.url, "for i in range(1000):\n    open(f'a{i:04d}', 'w').write('x')\n")
    assert record["status"] == "completed", record["failure"]
    assert len(record["output_files"]) == 1000 and "main.py" not in record["output_files"]


@given(
    st.lists(st.lists(st.sampled_from(["a", "a-", "a.b", "b", "ab"]), min_size=1, max_size=3)),
    st.lists(patterns, min_size=1, max_size=2),
)
def test_copy_out_keeps_the_matching_files_in_path_order(tmp_path_factory, tree, pattern_list):
    base = tmp_path_factory.mktemp("collect")
    work, outputs = base / "work", base / "outputs"
    work.mkdir(), outputs.mkdir()
    files = set()
    for parts in tree:
        path = "/".join(parts)
        if any(path.startswith(f + "/") or f.startswith(path + "/") for f in files | {path}):
            continue  # a file where a directory would be, or the other way round
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(path)
        files.add(path)
    collected = collect(work, outputs, pattern_list, {}, 100, 10**6)
    wanted = sorted(path for path in files if any(reference(p, path) for p in pattern_list))
    assert [out.path for out in collected.outputs] == wanted


def test_an_unchanged_input_larger_than_the_room_left_is_no_output_and_no_problem(tmp_path):
    # "a.bin" (new) is copied out first and leaves 400 of the 1000 bytes; "z.dat" is an input the
    # job left as it was: it is no output, whatever its size, so it needs no room and is not
    # reported as a file left out (which failed the job `output_limit`).
    work, outputs = tmp_path / "work", tmp_path / "outputs"
    work.mkdir(), outputs.mkdir()
    (work / "a.bin").write_bytes(b"a" * 600)
    (work / "z.dat").write_bytes(b"z" * 500)
    inputs = {"z.dat": hashlib.sha256(b"z" * 500).hexdigest()}
    collected = collect(work, outputs, ["**"], inputs, 100, 1000)
    assert [(out.path, out.problem) for out in collected.outputs] == [("a.bin", None)]
    assert collected.left_out == 0 and not collected.too_many
    assert sorted(path.name for path in outputs.iterdir()) == ["a.bin"]


def test_the_outputs_dir_is_made_private_for_the_first_output_and_not_without_one(tmp_path):
    # The setup no longer makes it (a mkdir on the state dir's disk, for every job): the
    # collection does, only the server's (0700) as before, and only when a file is copied out.
    work, outputs = tmp_path / "work", tmp_path / "outputs"
    work.mkdir()
    (work / "main.py").write_bytes(b"print('hello')\n")
    inputs = {"main.py": hashlib.sha256(b"print('hello')\n").hexdigest()}
    assert collect(work, outputs, ["**"], inputs, 100, 1000).outputs == []
    assert not outputs.exists()
    (work / "out" / "deep").mkdir(parents=True)
    (work / "out" / "deep" / "result.txt").write_text("kept")
    collected = collect(work, outputs, ["**"], inputs, 100, 1000)
    assert [out.path for out in collected.outputs] == ["out/deep/result.txt"]
    assert (outputs / "out" / "deep" / "result.txt").read_text() == "kept"
    assert outputs.stat().st_mode & 0o777 == 0o700


def deep_tree(root: Path, levels: int, subdirs: int) -> None:
    """Directories too deep for the host to read below `root`: `levels` nested 254-byte names
    of control characters, then `subdirs` more in the deepest (made through dir fds)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(levels):
            name = f"{level:02d}" + "\x01" * 252
            os.mkdir(name, dir_fd=fd)
            fd, previous = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(previous)
        for index in range(subdirs):
            os.mkdir(f"{index:05d}" + "\x01" * 249, dir_fd=fd)
    finally:
        os.close(fd)


def test_copy_out_keeps_a_bounded_number_of_problems(tmp_path):
    work, outputs = tmp_path / "work", tmp_path / "outputs"
    work.mkdir(), outputs.mkdir()
    deep_tree(work, 15, MAX_PROBLEMS + 50)  # 16 x 255 bytes: every subdirectory is unreadable
    (work / "result.txt").write_text("kept")
    collected = collect(work, outputs, ["**"], {}, 100, 10**6)
    assert collected.outputs[0].path == "result.txt" and collected.outputs[0].problem is None
    assert len(collected.outputs) == 1 + MAX_PROBLEMS
    assert all("File name too long" in str(out.problem) for out in collected.outputs[1:])
    assert collected.unlisted == 50
    # A pattern that cannot match below a directory never reads it: no problem to report.
    collected = collect(work, outputs, ["*.txt"], {}, 100, 10**6)
    assert [out.path for out in collected.outputs] == ["result.txt"]


LOG_CAP = 10 * 2**20
DEEP_TREE_JOB = """\
import os, sys
sys.stdout.write('x' * {filler})
for level in range(15):
    name = f'{{level:02d}}' + '\\x01' * 252
    os.mkdir(name)
    os.chdir(name)
for index in range(2000):
    os.mkdir(f'{{index:05d}}' + '\\x01' * 249)
print('24 bytes of output here')
raise SystemExit(3)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("filler", [0, LOG_CAP - 20_000])
def test_notes_about_outputs_count_against_the_log_cap(server, filler):
    # 15 nested 254-byte names of control characters (each escaped as 4 characters in a note)
    # and 2000 directories below them that the host cannot read: a 16 KB note each, 32 MB.
    record = run_job(server.url, DEEP_TREE_JOB.format(filler=filler), wait=240)
    assert record["status"] == "failed" and record["failure"] == "nonzero_exit"
    log = httpx.get(f"{server.url}/logs/{record['job_id']}", timeout=60).content
    assert len(log) <= LOG_CAP + LOG_SLACK
    assert b"24 bytes of output here\n" in log
    assert b"not listed: not read (File name too long)" in log
    assert re.search(rb"\[jobrunner\] \d+ more output\(s\) not listed", log)
    assert log.endswith(b"\n[jobrunner] the job exited with code 3\n")  # the reason stays last


def test_output_patterns_over_the_total_cap_are_a_clear_400(server):
    outputs = ["a" * 1024] * 4 + ["b"]
    response = submit(server.url, {"main.py": ""}, {"entrypoint": "main.py", "outputs": outputs})
    assert response.status_code == 400
    assert response.json() == {
        "error": "Invalid manifest",
        "details": "outputs: the patterns add up to 4097 characters, more than the 4096 allowed",
    }
