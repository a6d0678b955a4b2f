"""Manifest rules as properties: any JSON either becomes a safe Manifest or a ManifestError."""

import contextlib
import json
import re

from hypothesis import given
from hypothesis import strategies as st

from jobrunner.manifest import ManifestError, parse

OFFER = {
    "interpreters": {"python", "bash"},
    "environments": {"default", "nlp"},
    "max_timeout": 300,
    "max_memory_mb": 512,
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 1000) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
fields = st.fixed_dictionaries(
    {},
    optional={
        "entrypoint": st.one_of(
            st.sampled_from(["main.py", "a/b.sh", "../x.py", "/abs.py", "x.rb", "./c.py", ""]),
            json_values,
        ),
        "interpreter": st.one_of(st.sampled_from(["python", "bash", "ruby"]), json_values),
        "args": st.one_of(st.lists(st.text(max_size=10), max_size=70), json_values),
        "environment": st.one_of(st.sampled_from(["default", "nlp", "gpu"]), json_values),
        "outputs": st.one_of(
            st.lists(st.sampled_from(["**", "out/", "*.txt", "../x", "/abs"]), max_size=3),
            json_values,
        ),
        "env": st.one_of(
            st.dictionaries(
                st.sampled_from(["A", "LD_PRELOAD", "PYTHONHOME", "lower", "X_1", "A\n", "B\r"])
                | st.text(max_size=6),
                st.text(max_size=5),
            ),
            json_values,
        ),
        "timeout": st.one_of(st.integers(-5, 400), json_values),
        "memory_mb": st.one_of(st.integers(0, 600), json_values),
        "surprise": json_values,
    },
)


@given(fields)
def test_any_manifest_is_parsed_safely_or_refused_clearly(document):
    try:
        manifest = parse(json.dumps(document), **OFFER)
    except ManifestError as error:
        assert str(error) and "\n" not in str(error)
        return
    assert "surprise" not in document
    for path in (manifest.entrypoint, *manifest.outputs):
        assert not path.startswith("/") and ".." not in path.split("/")
    assert manifest.interpreter in OFFER["interpreters"]
    assert manifest.environment in OFFER["environments"]
    assert 1 <= manifest.timeout <= 300 and 16 <= manifest.memory_mb <= 512
    assert len(manifest.args) <= 64
    assert not any(name.startswith("LD_") or name == "PYTHONHOME" for name in manifest.env)
    assert all(re.fullmatch("[A-Z_][A-Z0-9_]*", name) for name in manifest.env)


def test_a_name_with_a_final_newline_is_no_environment_variable_name():
    # Python's `$` matches before a final newline: "A\n" once passed as a name.
    for name in ("A\n", "LD_PRELOAD\n", "PATH\r", "A B"):
        document = json.dumps({"entrypoint": "main.py", "env": {name: "x"}})
        try:
            parse(document, **OFFER)
        except ManifestError as error:
            assert "env" in str(error)
        else:
            raise AssertionError(f"{name!r} was accepted")


@given(st.binary(max_size=60))
def test_arbitrary_bytes_never_raise_anything_else(data):
    with contextlib.suppress(ManifestError):
        parse(data, **OFFER)


def test_defaults_are_filled_in():
    manifest = parse('{"entrypoint": "main.py"}', **OFFER)
    assert (
        manifest.interpreter,
        manifest.environment,
        manifest.args,
        manifest.outputs,
        manifest.env,
        manifest.timeout,
        manifest.memory_mb,
    ) == ("python", "default", [], ["**"], {}, 300, 512)
    assert parse('{"entrypoint": "run.sh"}', **OFFER).interpreter == "bash"


def test_server_limits_are_never_exceeded():
    strict = {**OFFER, "max_timeout": 60, "max_memory_mb": 128}
    for document in (
        '{"entrypoint": "a.py", "timeout": 61}',
        '{"entrypoint": "a.py", "memory_mb": 129}',
    ):
        try:
            parse(document, **strict)
        except ManifestError as error:
            assert "exceeds this server's limit" in str(error)
        else:
            raise AssertionError(document)


def test_output_patterns_are_capped_in_total():
    patterns = ["a" * 1000] * 4
    assert parse(json.dumps({"entrypoint": "m.py", "outputs": patterns}), **OFFER).outputs
    with contextlib.suppress(ManifestError):
        parse(json.dumps({"entrypoint": "m.py", "outputs": [*patterns, "b" * 97]}), **OFFER)
        raise AssertionError("4097 characters of patterns accepted")
