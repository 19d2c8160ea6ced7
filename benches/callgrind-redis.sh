#!/usr/bin/env bash
# Instructions per decision inside Redis, per algorithm: the deterministic twin of
# algorithms-redis.sh, whose ratios a shared machine makes noisy. Redis runs under
# callgrind while our server (not under valgrind) answers N and then, against a fresh
# Redis, 2N ShouldRateLimit requests over 64 streams with one `user` rule counted with
# each algorithm, and a `rate_limits` list of a bucket and a sliding window (`joint`, one
# call of the group script); per decision = (Ir(2N) - Ir(N)) / N, which cancels start-up.
# Batching changes how many calls share a read, so expect a few percent between runs.
# Usage: benches/callgrind-redis.sh [N=5000] [BIN_DIR=target/release]
#   (a BIN_DIR other than the default is used as built: compare two commits' servers)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000}
bin=${2:-}
. benches/lib.sh
scratch cgr
if [ -z "$bin" ]; then
    cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches \
        --bin rl-load >&2
    bin=${CARGO_TARGET_DIR:-target}/release
fi
REDIS_PORT=16403
GRPC_PORT=18962

rules() { # ALGORITHM: the rule file
    local unit="unit: minute, requests_per_unit: 1000000000"
    case $1 in
    joint)
        printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limits:\n'
        printf '      - {%s, algorithm: token_bucket, burst: 1000000000, name: b}\n' "$unit"
        printf '      - {%s, algorithm: sliding_window, name: s}\n' "$unit"
        ;;
    token_bucket)
        printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {%s, algorithm: token_bucket, burst: 1000000000}\n' "$unit"
        ;;
    *)
        printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {%s, algorithm: %s}\n' "$unit" "$1"
        ;;
    esac
}

# ir ALGORITHM COUNT: Redis's total Ir over start-up, COUNT decisions and shutdown.
ir() {
    local alg=$1 count=$2 out="$work/cg.$1.$2"
    rm -rf "$work/rt" && mkdir -p "$work/rt/config"
    rules "$alg" >"$work/rt/config/api.yaml"
    valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --bind 127.0.0.1 \
        --port $REDIS_PORT --save "" --appendonly no >"$work/redis.log" 2>&1 &
    local rp=$!
    for _ in $(seq 300); do redis-cli -p $REDIS_PORT PING >/dev/null 2>&1 && break; sleep 0.1; done
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=18960 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18961 \
        GRPC_HOST=127.0.0.1 GRPC_PORT=$GRPC_PORT RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn \
        BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT \
        "$bin/ratelimit" >"$work/server.log" 2>&1 &
    local sp=$!
    for _ in $(seq 300); do
        (exec 3<>/dev/tcp/127.0.0.1/$GRPC_PORT) 2>/dev/null && break
        sleep 0.1
    done
    "$bin/rl-load" --addr 127.0.0.1:$GRPC_PORT --count "$count" --streams 64 >"$work/load.log"
    grep -q " errors=0 " "$work/load.log" || { cat "$work/load.log" "$work/server.log"; exit 1; }
    kill -TERM $sp
    wait $sp 2>/dev/null || true
    kill -TERM $rp
    wait $rp 2>/dev/null || true
    grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
}

printf '%-15s %14s %14s %14s\n' algorithm "Ir(N)" "Ir(2N)" "Ir/decision"
for alg in fixed_window token_bucket sliding_window joint; do
    a=$(ir $alg "$N")
    b=$(ir $alg $((2 * N)))
    printf '%-15s %14s %14s %14.0f\n' $alg "$a" "$b" "$(echo "($b - $a) / $N" | bc -l)"
done
