#!/usr/bin/env bash
# A/B of two `ratelimit` builds on one Redis, alternating, so a change to the Redis path is
# judged by a ratio measured in the same run (docs/benchmarks.md):
#   benches/ab-redis.sh BASELINE_BIN CANDIDATE_BIN [DURATION_SECS=5] [REPS=5] [ENV=VALUE...]
# Both servers run with the same settings (plus the extra ENV=VALUE pairs, applied to the
# candidate only, e.g. REDIS_PIPELINE_WINDOW=100us); the load is `rl-load` over gRPC, one
# descriptor, 64 streams. Prints each round's rates and the median candidate/baseline.
# AB_TLS=1 serves Redis over TLS only (a throwaway CA from openssl) and points both servers
# at it with REDIS_TLS.
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1") B=$(realpath "$2")
DURATION=${3:-5}
REPS=${4:-5}
shift 4 2>/dev/null || shift $#
REDIS_PORT=16398
. benches/lib.sh
scratch ab
cargo build --release --locked -p ratelimit-benches --bin rl-load >&2
load_bin=${CARGO_TARGET_DIR:-target}/release/rl-load

redis_args=(--port "$REDIS_PORT")
store_env=()
if [ "${AB_TLS:-0}" = 1 ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=ab-ca \
        -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
        -keyout "$work/redis.key" -out "$work/redis.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san.ext"
    openssl x509 -req -in "$work/redis.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
        -CAcreateserial -days 1 -extfile "$work/san.ext" -out "$work/redis.pem" 2>/dev/null
    redis_args=(--port 0 --tls-port "$REDIS_PORT" --tls-cert-file "$work/redis.pem"
        --tls-key-file "$work/redis.key" --tls-ca-cert-file "$work/ca.pem" --tls-auth-clients no)
    store_env=(REDIS_TLS=true REDIS_TLS_CACERT="$work/ca.pem")
fi
redis-server --bind 127.0.0.1 "${redis_args[@]}" --save "" --appendonly no \
    --daemonize no --logfile "$work/redis.log" &
pids+=($!)
mkdir -p "$work/rt/config"
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
    >"$work/rt/config/api.yaml"
for _ in $(seq 50); do grep -q "Ready to accept" "$work/redis.log" 2>/dev/null && break; sleep 0.1; done

# start NAME BIN PORT_BASE ENV...
start() {
    local name=$1 bin=$2 base=$3
    shift 3
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=$base DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 1)) \
        GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 2)) RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn \
        BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT \
        "${store_env[@]}" "$@" \
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
