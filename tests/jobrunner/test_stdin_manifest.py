"""The manifest's `stdin` as properties: any text within the cap survives the trip through JSON
(however the client escapes it), beyond the cap it is a clear error, and the job hash covers it
only when it is not empty, so that jobs without stdin keep the hashes of earlier servers."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.manifest import ManifestError, parse
from jobrunner.signing import canonical_manifest, job_hash
from jobrunner.wire import STDIN_MAX, Manifest

OFFER = {
    "interpreters": {"python", "bash"},
    "environments": {"default"},
    "max_timeout": 300,
    "max_memory_mb": 512,
}
INPUTS = [("main.py", "ab" * 32)]
# Any code point a JSON string can carry: NUL and other controls, astral characters; no lone
# surrogates (no JSON decoder gives one, and UTF-8 cannot encode it).
stdin_text = st.text(st.characters(codec="utf-8"), max_size=200)


@given(stdin_text, st.booleans())
def test_any_stdin_text_round_trips(stdin, ascii_only):
    text = json.dumps({"entrypoint": "main.py", "stdin": stdin}, ensure_ascii=ascii_only)
    manifest = parse(text, **OFFER)
    assert manifest.stdin == stdin


@given(st.integers(0, 8), st.sampled_from(["a", "é", "✓", "😀", "\x00"]))
def test_the_cap_counts_utf8_bytes(extra, char):
    size = len(char.encode())
    fits = char * (STDIN_MAX // size)
    assert parse(json.dumps({"entrypoint": "main.py", "stdin": fits}), **OFFER).stdin == fits
    over = fits + "a" * (STDIN_MAX - len(fits.encode()) + 1 + extra)
    with pytest.raises(ManifestError, match=r"^stdin: \d+ bytes as UTF-8, more than the 1048576"):
        parse(json.dumps({"entrypoint": "main.py", "stdin": over}), **OFFER)


@given(stdin_text)
def test_the_canonical_manifest_is_pythons_json_with_stdin_only_when_given(stdin):
    manifest = Manifest(entrypoint="main.py", interpreter="python", stdin=stdin)
    fields = {name: getattr(manifest, name) for name in manifest.__struct_fields__}
    if not stdin:
        del fields["stdin"]
    python = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_manifest(manifest) == python.encode()
    without = Manifest(entrypoint="main.py", interpreter="python")
    assert (job_hash(manifest, INPUTS) == job_hash(without, INPUTS)) == (stdin == "")


def test_a_job_without_stdin_keeps_the_hash_it_had_before_the_field():
    # Computed by the code before `stdin` existed (commit 0b2edd8).
    manifest = Manifest(entrypoint="main.py", interpreter="python", args=["a"], env={"X": "1"})
    assert job_hash(manifest, INPUTS) == (
        "f2411432c995f7198f50671247c31846e056598da2b2fb1e05a00563137e12ad"
    )
