#!/usr/bin/env bash
# `make test-container`: build deploy/Containerfile with Debian's podman, run it with the options
# the file documents (no --privileged, no added capability), submit one job and wait until it
# has completed. Not part of `make test`: it needs podman, a cgroup v2 host, root (rootful
# podman with --userns=auto) and the base image (CONTAINER_BASE, default Debian's from
# docker.io; a local image of that name will do where no registry is reachable).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
base="${CONTAINER_BASE:-docker.io/library/debian:bookworm-slim}"
image=localhost/jobrunner:test
name="jobrunner-test-$$"
port="${CONTAINER_PORT:-18080}"
context="$repo/.cache/container"

command -v podman >/dev/null || { echo "test-container: missing podman (ci/container-packages.txt)" >&2; exit 2; }
[ -e /sys/fs/cgroup/cgroup.controllers ] || {
    echo "test-container: the host does not run the unified cgroup v2 hierarchy" >&2; exit 2; }

rm -rf "$context"
mkdir -p "$context/wheels"
cp "$repo/deploy/Containerfile" "$context/"
# The wheels of this repository (make dist) and of their dependencies, for the image's pip.
"$repo/.venv/bin/python" -m pip wheel -q --disable-pip-version-check --wheel-dir "$context/wheels" \
    "$repo"/dist/servekit-*.whl "$repo"/dist/jobrunner-*.whl
podman build --build-arg "BASE=$base" -t "$image" -f "$context/Containerfile" "$context"

apparmor=()
[ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" != Y ] ||
    apparmor=(--security-opt apparmor=unconfined)
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
podman run -d --name "$name" --userns=auto:size=65536 --security-opt unmask=ALL "${apparmor[@]}" \
    -p "127.0.0.1:$port:8080" "$image" >/dev/null
"$repo/.venv/bin/python" "$repo/ci/container_job.py" "http://127.0.0.1:$port" \
    || { podman logs "$name" >&2; exit 1; }
podman logs "$name" 2>&1 | grep '^sandbox: '
