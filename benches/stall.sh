#!/usr/bin/env bash
# How much one client's large requests slow another client's small ones on the same gRPC
# connection thread (TOKIO_WORKER_THREADS=1: one connection thread serves both). Prints
# rl-stall's line per case: no attacker, the largest request allowed by default (1,000
# descriptors), and one far over the limits that still fits gRPC's 4 MiB message limit
# (250,000 descriptors of 13 bytes: refused by ours, decided by a server without limits).
# Usage: benches/stall.sh [SECONDS=5] [SERVER_BINARY=target/release/ratelimit]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-5}
cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches \
    --bin rl-stall >&2
server=${2:-target/release/ratelimit}
. benches/lib.sh
scratch stall
mkdir -p "$work/rt/config"
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
    >"$work/rt/config/api.yaml"
port=18962
env -i PATH="$PATH" HOST=127.0.0.1 PORT=18960 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18961 \
    GRPC_HOST=127.0.0.1 GRPC_PORT=$port RUNTIME_ROOT="$work/rt" LOG_LEVEL=error \
    BACKEND_TYPE=memory TOKIO_WORKER_THREADS=1 USE_STATSD=false "$server" \
    >"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
    grep -q listening "$work/server.log" && break
    sleep 0.1
done
for d in 0 1000 250000; do
    target/release/rl-stall "127.0.0.1:$port" "$d" "$SECONDS_EACH"
done
