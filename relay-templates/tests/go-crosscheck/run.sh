#!/usr/bin/env bash
# Runs the conformance table through real Go (apt: golang-go or golang-1.19-go,
# python3-yaml) and fails on any case where Go and the table disagree unexpectedly.
# scripts/test.sh runs it through scripts/test.d/relay-go-crosscheck.sh after
# scripts/deps.d/relay.sh has installed Go; there RELAY_REQUIRE_GO=1 makes a missing Go an
# error rather than a skip.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
go_bin="$(command -v go || ls /usr/lib/go-*/bin/go 2>/dev/null | tail -1 || true)"
if [ -z "$go_bin" ]; then
    if [ "${RELAY_REQUIRE_GO:-}" = 1 ]; then
        echo "go-crosscheck: no Go toolchain but RELAY_REQUIRE_GO=1 (scripts/deps.d/relay.sh)" >&2
        exit 1
    fi
    echo "go-crosscheck: no Go toolchain (apt-get install golang-go); skipped"
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1])), open(sys.argv[2], "w"))' \
    "$here/../conformance.yaml" "$work/cases.json"
cp "$here/main.go" "$work/main.go"
cd "$work"
export GOCACHE="$work/cache" GOPATH="$work/gopath" GOFLAGS=-mod=mod
"$go_bin" mod init crosscheck >/dev/null 2>&1
"$go_bin" version
"$go_bin" run main.go cases.json
