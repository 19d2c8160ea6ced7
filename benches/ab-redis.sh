#!/usr/bin/env bash
# A/B of two `ratelimit` builds on one Redis, alternating, so a change to the Redis path is
# judged by a ratio measured in the same run (docs/benchmarks.md):
#   benches/ab-redis.sh BASELINE_BIN CANDIDATE_BIN [DURATION_SECS=5] [REPS=5] [ENV=VALUE...]
# Both servers run with the same settings (plus the extra ENV=VALUE pairs, applied to the
# candidate only, e.g. REDIS_PIPELINE_WINDOW=100us); the load is `rl-load` over gRPC, one
# descriptor, 64 streams. Prints each round's rates and the median candidate/baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1") B=$(realpath "$2")
DURATION=${3:-5}
REPS=${4:-5}
shift 4 2>/dev/null || shift $#
REDIS_PORT=16398
work=$(mktemp -d /tmp/rl-ab.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
cargo build --release --locked -p ratelimit-benches --bin rl-load >&2
load_bin=${CARGO_TARGET_DIR:-target}/release/rl-load

redis-server --bind 127.0.0.1 --port $REDIS_PORT --save "" --appendonly no \
    --daemonize no --logfile "$work/redis.log" &
pids+=($!)
mkdir -p "$work/rt/config"
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
    >"$work/rt/config/api.yaml"
for _ in $(seq 50); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && break; sleep 0.1; done

# start NAME BIN PORT_BASE ENV...
start() {
    local name=$1 bin=$2 base=$3
    shift 3
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=$base DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 1)) \
        GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 2)) RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn \
        BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT "$@" \
        "$bin" >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        grep -q "listening" "$work/$name.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$name did not start:"; cat "$work/$name.log"; exit 1
}
start baseline "$A" 18380
start candidate "$B" 18480 "$@"
rate() {
    timeout $((DURATION + 30)) "$load_bin" --duration "$DURATION" --streams 64 \
        --addr "127.0.0.1:$1" --label "$2" | tee -a "$work/lines" | sed -n 's/.* rate=\([^ ]*\).*/\1/p'
}
ratios=()
for rep in $(seq "$REPS"); do
    a=$(rate 18382 baseline)
    b=$(rate 18482 candidate)
    r=$(echo "$b / $a" | bc -l)
    printf 'round %d: baseline %s/s  candidate %s/s  ratio %.3f\n' "$rep" "$a" "$b" "$r"
    ratios+=("$r")
done
printf 'MEDIAN candidate / baseline = %.3f over %d rounds\n' \
    "$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" "$REPS"
