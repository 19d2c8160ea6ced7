#!/usr/bin/env bash
# A/B of two builds without Redis: the null gRPC server and ours on the memory store, each
# baseline then candidate, one process at a time, ROUNDS times; prints each run's rate.
#   benches/ab-local.sh BASE_DIR CANDIDATE_DIR [ROUNDS=3] [RL_LOAD_ARGS...]
# A *_DIR holds that build's `ratelimit` and `rl-null-server` (e.g. a copy of
# target/release); the load is this tree's `rl-load`, by default the raw client on
# 2 connections x 64 streams for 5 s (`--streams 64` alone: tonic's client).
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1") B=$(realpath "$2")
ROUNDS=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--raw --conns 2 --streams 64)
cargo build --release --locked -p ratelimit-benches --bin rl-load >&2
. benches/lib.sh
scratch ablocal
mkdir -p "$work/rt/config"
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
    >"$work/rt/config/api.yaml"
port=18982
for r in $(seq "$ROUNDS"); do
    for kind in null memory; do
        for side in baseline candidate; do
            dir=$A
            [ $side = candidate ] && dir=$B
            if [ $kind = null ]; then
                "$dir/rl-null-server" "127.0.0.1:$port" >"$work/server.log" 2>&1 &
            else
                env -i PATH="$PATH" HOST=127.0.0.1 PORT=18980 DEBUG_HOST=127.0.0.1 \
                    DEBUG_PORT=18981 GRPC_HOST=127.0.0.1 GRPC_PORT=$port \
                    RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn BACKEND_TYPE=memory \
                    USE_STATSD=false "$dir/ratelimit" >"$work/server.log" 2>&1 &
            fi
            sp=$!
            for _ in $(seq 50); do
                (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
                sleep 0.1
            done
            rate=$(target/release/rl-load --addr "127.0.0.1:$port" "${ARGS[@]}" --duration 5 |
                grep -o 'rate=[0-9]*')
            echo "round $r $kind $side $rate"
            kill $sp
            wait $sp 2>/dev/null || true
        done
    done
done
