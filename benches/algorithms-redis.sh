#!/usr/bin/env bash
# The algorithms on Redis, each as a ratio to fixed_window in the same run: three servers
# (one build) on one Redis, alike but for the rule's algorithm, loaded in turn over gRPC,
# one descriptor over 1000 keys, 64 streams; each round with tonic's client and with
# rl-load's raw HTTP/2 client (two client shapes: a ratio that holds for one only is not
# a result). Limits are high, so every decision is an allowed one (the common case).
# Each load also prints the CPU per decision of the generator, the server and Redis.
#   benches/algorithms-redis.sh [DURATION_SECS=5] [REPS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
REPS=${2:-5}
REDIS_PORT=16397
. benches/lib.sh
scratch alg
cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches --bin rl-load >&2
bin=${CARGO_TARGET_DIR:-target}/release
echo "== $(date -u +%FT%TZ) $(nproc) cores; $(redis-server --version | cut -d' ' -f1-3)"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --daemonize no --logfile "$work/redis.log" &
pids+=($!)
redis_pid=$!
for _ in $(seq 50); do grep -q "Ready to accept" "$work/redis.log" 2>/dev/null && break; sleep 0.1; done

# start ALGORITHM PORT_BASE: a server whose `user` rule counts with ALGORITHM.
start() {
    local alg=$1 base=$2 extra=""
    [ "$alg" = token_bucket ] && extra=", burst: 1000000000"
    mkdir -p "$work/$alg/config"
    printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000, algorithm: %s%s}\n' \
        "$alg" "$extra" >"$work/$alg/config/api.yaml"
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=$base DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 1)) \
        GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 2)) RUNTIME_ROOT="$work/$alg" LOG_LEVEL=warn \
        BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT \
        "$bin/ratelimit" >"$work/$alg.log" 2>&1 &
    pids+=($!)
    server_pid[$alg]=$!
    for _ in $(seq 100); do
        grep -q "listening" "$work/$alg.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$alg did not start:"; cat "$work/$alg.log"; exit 1
}
declare -A server_pid
start fixed_window 18580
start token_bucket 18680
start sliding_window 18780
port() { case $1 in fixed_window) echo 18582 ;; token_bucket) echo 18682 ;; sliding_window) echo 18782 ;; esac; }
rate() { # ALGORITHM CLIENT_FLAG...: prints the rate; the CPU split goes to stderr.
    local alg=$1 line s0 r0 n
    shift
    s0=$(ticks "${server_pid[$alg]}") r0=$(ticks "$redis_pid")
    line=$(timeout $((DURATION + 30)) "$bin/rl-load" --duration "$DURATION" --streams 64 \
        --addr "127.0.0.1:$(port "$alg")" --label "$alg" "$@")
    n=$(echo "$line" | sed -n 's/.* decisions=\([^ ]*\).*/\1/p')
    printf '  %s %s: CPU us per decision: generator %s, server %.1f, Redis %.1f\n' "$alg" "${1:---tonic}" \
        "$(echo "$line" | sed -n 's/.* load_cpu_us=\([^ ]*\).*/\1/p')" \
        "$(us_per $(($(ticks "${server_pid[$alg]}") - s0)) "$n")" \
        "$(us_per $(($(ticks "$redis_pid") - r0)) "$n")" >&2
    echo "$line" | sed -n 's/.* rate=\([^ ]*\).*/\1/p'
}
declare -A ratios
for rep in $(seq "$REPS"); do
    for client in tonic raw; do
        flag=()
        [ "$client" = raw ] && flag=(--raw)
        f=$(rate fixed_window "${flag[@]}")
        t=$(rate token_bucket "${flag[@]}")
        s=$(rate sliding_window "${flag[@]}")
        rt=$(echo "$t / $f" | bc -l) rs=$(echo "$s / $f" | bc -l)
        printf 'round %d, %s client: fixed %s/s  token_bucket %s/s (%.3f)  sliding_window %s/s (%.3f)\n' \
            "$rep" "$client" "$f" "$t" "$rt" "$s" "$rs"
        ratios[$client.tb]+="$rt "
        ratios[$client.sw]+="$rs "
    done
done
median() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for client in tonic raw; do
    printf 'MEDIAN %s client: token_bucket / fixed_window = %.3f, sliding_window / fixed_window = %.3f over %d rounds (target >= 0.9)\n' \
        "$client" "$(median "${ratios[$client.tb]}")" "$(median "${ratios[$client.sw]}")" "$REPS"
done
