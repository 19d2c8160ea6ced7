#!/usr/bin/env bash
# The relay-templates conformance table, checked against real Go. scripts/deps.d/relay.sh
# installs Go (golang-go) and python3-yaml and sets RELAY_REQUIRE_GO=1, so in scripts/test.sh
# a missing tool fails the run; run on its own without them, the check is skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! python3 -c 'import yaml' 2>/dev/null; then
    if [ "${RELAY_REQUIRE_GO:-}" = 1 ]; then
        echo "relay go-crosscheck: python3-yaml missing but RELAY_REQUIRE_GO=1" >&2
        exit 1
    fi
    echo "relay go-crosscheck: python3-yaml missing; skipped"
    exit 0
fi
exec relay-templates/tests/go-crosscheck/run.sh
