#!/usr/bin/env bash
# Installs the system packages the test suite needs, once. Each area of the project owns a
# file in scripts/deps.d/ that calls `need_apt PACKAGE...` or installs its own tools.
# Sourced by scripts/test.sh (from the repository root) or run on its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

APT_UPDATED=0
need_apt() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    if [ "$APT_UPDATED" -eq 0 ]; then
        $sudo apt-get update -qq
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
export -f need_apt 2>/dev/null || true

shopt -s nullglob
for f in scripts/deps.d/*.sh; do
    # shellcheck source=/dev/null
    source "$f"
done
