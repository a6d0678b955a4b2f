#!/usr/bin/env bash
# `make test-container`: build deploy/Containerfile with Debian's podman, run it with the options
# the file documents (no --privileged, no added capability), submit one job and wait until it has
# completed. Not part of `make test`. Needs root (rootful podman, --userns=auto) and the unified
# cgroup v2 hierarchy: on a cgroup v1 or hybrid host (this project's CI machines) it runs itself
# inside the cgroup v2 VM of ci/cgroup2-vm.sh instead.
#
# The base image: CONTAINER_BASE (default Debian's bookworm-slim from docker.io), or, where no
# registry answers, a Debian bookworm made here with debootstrap from the Debian mirror (with
# python3, python3-venv and uidmap already in, so the image's RUN needs no network).
# CONTAINER_NETWORK=host runs build and container on the host's network (the VM has no netfilter
# for podman's port forwarding; the container's privileges are the same).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
base="${CONTAINER_BASE:-docker.io/library/debian:bookworm-slim}"
rootfs="$repo/.cache/container-base/rootfs"
image=localhost/jobrunner:test
name="jobrunner-test-$$"
context="$repo/.cache/container"

[ "$(id -u)" = 0 ] || { echo "test-container: needs root (rootful podman)" >&2; exit 2; }
command -v podman >/dev/null || { echo "test-container: missing podman (ci/container-packages.txt)" >&2; exit 2; }
ls "$repo"/dist/jobrunner-*.whl >/dev/null || { echo "test-container: make dist first" >&2; exit 2; }

if [ ! -e /sys/fs/cgroup/cgroup.controllers ] && [ "${1:-}" != --inside-vm ]; then
    echo "test-container: this host runs cgroup v1 (or a hybrid): in the cgroup v2 VM instead"
    if ! podman pull -q "$base" >/dev/null 2>&1 && [ ! -x "$rootfs/usr/bin/python3" ]; then
        echo "test-container: $base cannot be pulled; a Debian bookworm with debootstrap"
        rm -rf "$rootfs"
        mkdir -p "$(dirname "$rootfs")"
        debootstrap --variant=minbase --include=python3,python3-venv,uidmap bookworm "$rootfs" \
            http://deb.debian.org/debian >/dev/null
    fi
    rm -rf "$repo/.cache/container-wheels"  # the VM has no network: their dependencies, here
    mkdir -p "$repo/.cache/container-wheels"
    "$repo/.venv/bin/python" -m pip wheel -q --disable-pip-version-check \
        --wheel-dir "$repo/.cache/container-wheels" "$repo"/dist/servekit-*.whl "$repo"/dist/jobrunner-*.whl
    CGROUP2_VM_TESTS=container exec bash "$repo/ci/cgroup2-vm.sh"
fi

podman_run=(-p 127.0.0.1:18080:8080)
url=http://127.0.0.1:18080
build_net=()
if [ "${CONTAINER_NETWORK:-}" = host ]; then
    podman_run=(--network host)
    url=http://127.0.0.1:8080
    build_net=(--network host)
fi
if ! podman image exists "$base" && ! podman pull -q "$base" >/dev/null 2>&1; then
    [ -x "$rootfs/usr/bin/python3" ] || { echo "test-container: no base image $base" >&2; exit 2; }
    base=localhost/jobrunner-base:bookworm
    tar -C "$rootfs" -c . | podman import -q - "$base" >/dev/null
fi

rm -rf "$context"
mkdir -p "$context/wheels"
cp "$repo/deploy/Containerfile" "$context/"
if [ "${1:-}" != --inside-vm ]; then
    "$repo/.venv/bin/python" -m pip wheel -q --disable-pip-version-check \
        --wheel-dir "$context/wheels" "$repo"/dist/servekit-*.whl "$repo"/dist/jobrunner-*.whl
else  # the VM has no network: the host fetched them (above)
    cp "$repo"/.cache/container-wheels/*.whl "$context/wheels/"
fi
cp "$repo"/dist/*.whl "$context/wheels/"  # last: this checkout's own, whatever was there
podman build -q "${build_net[@]}" --build-arg "BASE=$base" -t "$image" -f "$context/Containerfile" \
    "$context"

apparmor=()
[ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" != Y ] ||
    apparmor=(--security-opt apparmor=unconfined)
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# podman's default seccomp profile, but sethostname and setdomainname allowed without
# CAP_SYS_ADMIN: nsjail names each jail's own UTS namespace (deploy/Containerfile says why).
"$repo/.venv/bin/python" - "$context/seccomp.json" <<'PY'
import json, sys
profile = json.load(open("/usr/share/containers/seccomp.json"))
names = {"sethostname", "setdomainname"}
kept = [rule for rule in profile["syscalls"] if not names & set(rule["names"])]
kept.append({"names": sorted(names), "action": "SCMP_ACT_ALLOW"})
profile["syscalls"] = kept
json.dump(profile, open(sys.argv[1], "w"))
PY
# Exactly the options deploy/Containerfile documents: no --privileged, no --cap-add.
podman run -d --name "$name" --userns=auto:size=65536 --security-opt unmask=ALL \
    --security-opt "seccomp=$context/seccomp.json" "${apparmor[@]}" "${podman_run[@]}" "$image" \
    >/dev/null
if ! "$repo/.venv/bin/python" "$repo/ci/container_job.py" "$url"; then
    podman logs "$name" >&2
    exit 1
fi
podman logs "$name" 2>&1 | grep '^sandbox: '
