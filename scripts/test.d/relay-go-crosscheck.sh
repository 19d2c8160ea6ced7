#!/usr/bin/env bash
# The relay-templates conformance table, checked against real Go when a Go toolchain is
# installed (apt: golang-go or golang-1.19-go, plus python3-yaml); skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! python3 -c 'import yaml' 2>/dev/null; then
    echo "relay go-crosscheck: python3-yaml missing; skipped"
    exit 0
fi
exec relay-templates/tests/go-crosscheck/run.sh
