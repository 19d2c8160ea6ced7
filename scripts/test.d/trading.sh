#!/usr/bin/env bash
# Trading API tests outside cargo:
# 1. black box: an independent Python client (standard library only) creates a key with the
#    CLI, signs requests as the executium SDKs do, and drives the real server over loopback,
#    including a restart that must keep the data;
# 2. schemathesis against the served OpenAPI document and the live server.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -p trading-server --bin trading-api --locked -q
target_dir=${CARGO_TARGET_DIR:-target}
case $target_dir in /*) ;; *) target_dir="$(pwd)/$target_dir" ;; esac
bin="$target_dir/debug/trading-api"
python3 servers/trading/tests/blackbox.py "$bin"
PATH="$(pwd)/.tmp/trading-venv/bin:$PATH" bash servers/trading/tests/schemathesis.sh "$bin"
