#!/usr/bin/env bash
# The one test command (README): installs what the tests need, then runs every test.
# Safe on a fresh machine (root + apt) and on a machine that already has everything.
set -euo pipefail
cd "$(dirname "$0")/.."

# 1. System and language packages the tests need (each area owns one file). Sourced, so
#    that the locations they export (e.g. ENVOY_BIN) reach the tests.
source scripts/deps.sh

# 2. Every Rust test in the workspace: unit, integration (real binaries on loopback), doc tests.
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked

# 3. Tests that are not cargo tests (node, python, browsers), one script per area.
shopt -s nullglob
for t in scripts/test.d/*.sh; do
    echo "== $t"
    bash "$t"
done
echo "all tests passed"
