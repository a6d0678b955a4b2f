#!/usr/bin/env bash
# Installs the missing Debian packages of a list (ci/debian-packages.txt unless one is named).
# Only on a root Debian machine; elsewhere it says what is missing, and the tests that need it
# skip with that message (or fail when CI=true).
set -euo pipefail
list="${1:-$(dirname "$0")/debian-packages.txt}"
mapfile -t wanted < <(sed 's/#.*//' "$list" | awk 'NF {print $1}')
command -v dpkg-query >/dev/null || { echo "note: not a Debian system; install: ${wanted[*]}" >&2; exit 0; }
missing=()
for package in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
# Debian's nodejs ships npm separately; NodeSource's includes it.
[[ " ${wanted[*]} " != *" nodejs "* ]] || command -v npm >/dev/null || missing+=("npm")
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "note: missing Debian packages: ${missing[*]} (not root; tests that need them will skip)" >&2
fi
