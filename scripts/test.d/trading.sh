#!/usr/bin/env bash
# Black-box test of trading-api: an independent Python client (standard library only)
# creates a key with the CLI, signs requests as the executium SDKs do, and drives the real
# server over loopback, including a restart that must keep the data.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -p trading-server --bin trading-api --locked -q
python3 servers/trading/tests/blackbox.py "${CARGO_TARGET_DIR:-target}/debug/trading-api"
