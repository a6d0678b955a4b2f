"""Turning the `manifest` form field into a validated Manifest, or a ManifestError saying why.

Types and ranges are declared on the Struct (`wire.Manifest`); this module adds what a type
cannot say: paths stay inside the upload, the interpreter is inferred or offered, and the
environment exists.
"""

import posixpath
import re

import msgspec

from jobrunner import paths
from jobrunner.wire import STDIN_MAX, Manifest, decode_manifest

INTERPRETER_BY_EXTENSION = {".py": "python", ".sh": "bash", ".js": "node"}
_FORBIDDEN_ENV = re.compile(r"LD_.*|PYTHONHOME")  # whole names: see fullmatch below
# The output patterns together: matching a name costs a few operations on an int of one bit per
# pattern character, for each character of the name (see `workdir.Patterns`).
MAX_PATTERN_CHARS = 4096


class ManifestError(ValueError):
    """The manifest is not acceptable; the message is the `details` a client sees."""


def _translate(error: msgspec.DecodeError) -> str:
    text = str(error)
    if match := re.match(r"Object missing required field `(\w+)`", text):
        return f"Missing required field: {match.group(1)}"
    if match := re.match(r"Object contains unknown field `(.+?)`", text):
        return f"Unknown field: {match.group(1)}"
    if not isinstance(error, msgspec.ValidationError):  # malformed JSON, not a wrong value
        return f"Manifest is not valid JSON: {text}"
    if " - at `" not in text:
        return "Manifest must be a JSON object" if text.startswith("Expected `object`") else text
    message, where = text.rsplit(" - at ", 1)
    where = where.replace("`", "").replace("$.", "").replace("$", "manifest")
    return f"{where}: {message}"


def relative_path(path: str, what: str) -> str:
    """A normalised relative path that cannot leave the upload, or ManifestError."""
    try:
        normalised = paths.normalise(path)
    except paths.UnsafePath as error:
        raise ManifestError(f"{what} must stay inside the upload ({error}): {path}") from None
    if not normalised:
        raise ManifestError(f"{what} is empty: {path!r}")
    return normalised


def parse(
    text: str | bytes,
    *,
    interpreters: set[str],
    environments: set[str],
    max_timeout: int,
    max_memory_mb: int,
) -> Manifest:
    """Decode and check a manifest against what this server offers."""
    try:
        manifest = decode_manifest(text)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise ManifestError(_translate(error)) from None

    manifest.entrypoint = relative_path(manifest.entrypoint, "entrypoint")
    if manifest.interpreter is None:
        extension = posixpath.splitext(manifest.entrypoint)[1]
        manifest.interpreter = INTERPRETER_BY_EXTENSION.get(extension)
        if manifest.interpreter is None:
            raise ManifestError(
                "Missing required field: interpreter "
                f"(cannot infer it from {manifest.entrypoint!r})"
            )
    if manifest.interpreter not in interpreters:
        offered = ", ".join(sorted(interpreters))
        raise ManifestError(f"Unknown interpreter: {manifest.interpreter} (offered: {offered})")
    if manifest.environment not in environments:
        offered = ", ".join(sorted(environments))
        raise ManifestError(f"Unknown environment: {manifest.environment} (offered: {offered})")
    # A NUL cannot reach an argv or an environment: refuse it here, before anything is written.
    for index, arg in enumerate(manifest.args):
        if "\x00" in arg:
            raise ManifestError(f"args[{index}]: NUL character not allowed")
    for name, value in manifest.env.items():
        if _FORBIDDEN_ENV.fullmatch(name):
            raise ManifestError(f"Environment variable not allowed: {name}")
        if "\x00" in value:
            raise ManifestError(f"env.{name}: NUL character not allowed")
    # Standard input is bytes, so NUL is fine there; what is capped is its size as UTF-8 (a JSON
    # string cannot carry a lone surrogate: the decoder refuses it, so this always encodes).
    stdin_bytes = len(manifest.stdin.encode())
    if stdin_bytes > STDIN_MAX:
        raise ManifestError(
            f"stdin: {stdin_bytes} bytes as UTF-8, more than the {STDIN_MAX} allowed"
        )
    total = sum(len(pattern) for pattern in manifest.outputs)
    if total > MAX_PATTERN_CHARS:
        raise ManifestError(
            f"outputs: the patterns add up to {total} characters, more than the "
            f"{MAX_PATTERN_CHARS} allowed"
        )
    manifest.outputs = [
        relative_path(pattern, "outputs pattern") + ("/" if pattern.endswith("/") else "")
        for pattern in manifest.outputs
    ]
    if manifest.timeout > max_timeout:
        raise ManifestError(f"timeout {manifest.timeout} exceeds this server's limit {max_timeout}")
    if manifest.memory_mb > max_memory_mb:
        raise ManifestError(
            f"memory_mb {manifest.memory_mb} exceeds this server's limit {max_memory_mb}"
        )
    return manifest
