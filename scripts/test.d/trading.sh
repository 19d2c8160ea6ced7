#!/usr/bin/env bash
# Trading API tests outside cargo:
# 1. black box: independent Python clients (standard library only) create keys with the
#    CLI, sign requests as the executium SDKs do, and drive the real server over loopback
#    (servers/trading/tests/blackbox.py and every bb_*.py next to it);
# 2. coverage: every catalogue endpoint answered 200 to at least one of those tests;
# 3. schemathesis against the served OpenAPI document and the live server.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -p trading-server --bin trading-api --locked -q
target_dir=${CARGO_TARGET_DIR:-target}
case $target_dir in /*) ;; *) target_dir="$(pwd)/$target_dir" ;; esac
bin="$target_dir/debug/trading-api"
coverage=$(mktemp)
trap 'rm -f "$coverage"' EXIT
export TRADING_COVERAGE_FILE=$coverage
python3 servers/trading/tests/blackbox.py "$bin"
for t in servers/trading/tests/bb_*.py; do
    [ "$(basename "$t")" = bb_coverage.py ] && continue
    python3 "$t" "$bin"
done
if [ -f servers/trading/tests/bb_coverage.py ]; then
    python3 servers/trading/tests/bb_coverage.py "$bin" "$coverage"
fi
unset TRADING_COVERAGE_FILE
PATH="$(pwd)/.tmp/trading-venv/bin:$PATH" bash servers/trading/tests/schemathesis.sh "$bin"
