#!/usr/bin/env bash
# Instructions per gRPC decision in a whole server process, deterministic where the load
# ratios of run-load.sh are not: each server runs under callgrind while rl-load sends it N
# and then (in a fresh process) 2N ShouldRateLimit requests over 64 streams; per request
# = (Ir(2N) - Ir(N)) / N, which cancels start-up and shutdown. Servers: ours on the memory
# store, ours on Redis (our process only: Redis's own work is not counted), and the null
# gRPC server (same stack, answers at once). `null / ours` is the instruction-count twin
# of run-load's memory/null throughput ratio. Batching (frames per read, calls per Redis
# write) depends on timing, so expect a few percent between runs, not zero.
# Usage: benches/callgrind-server.sh [N=5000] [WORKERS=2]   (needs valgrind and redis-server)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000}
WORKERS=${2:-2}
. benches/lib.sh
scratch cgs
cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches \
    --bin rl-load --bin rl-null-server >&2
bin=target/release
mkdir -p "$work/rt/config"
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
    >"$work/rt/config/api.yaml"
REDIS_PORT=16402
redis-server --bind 127.0.0.1 --port $REDIS_PORT --save "" --appendonly no \
    --daemonize no --logfile "$work/redis.log" &
pids+=($!)

# ir KIND COUNT: total Ir of one server process that answered COUNT requests.
ir() {
    local kind=$1 count=$2 port=18952 out="$work/cg.$1.$2"
    local cmd=("$bin/ratelimit")
    [ "$kind" = null ] && cmd=("$bin/rl-null-server" "127.0.0.1:$port")
    local backend=memory
    [ "$kind" = redis ] && backend=redis
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=18950 DEBUG_HOST=127.0.0.1 DEBUG_PORT=18951 \
        GRPC_HOST=127.0.0.1 GRPC_PORT=$port RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn \
        BACKEND_TYPE=$backend REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT \
        TOKIO_WORKER_THREADS="$WORKERS" \
        valgrind --tool=callgrind --callgrind-out-file="$out" "${cmd[@]}" >"$work/server.log" 2>&1 &
    local sp=$!
    # Wait for the port (the null server's stdout is a buffered file here).
    for _ in $(seq 600); do
        (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
        sleep 0.1
    done
    "$bin/rl-load" --addr 127.0.0.1:$port --count "$count" --streams 64 >"$work/load.log"
    grep -q " errors=0 " "$work/load.log" || { cat "$work/load.log" "$work/server.log"; exit 1; }
    # TERM, not INT: a background job of a script starts with SIGINT ignored, and the null
    # server installs no handler of its own.
    kill -TERM $sp
    wait $sp 2>/dev/null || true
    grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
}

printf '%-7s %14s %14s %12s\n' server "Ir(N)" "Ir(2N)" "Ir/request"
declare -A per
for kind in memory redis null; do
    a=$(ir $kind "$N")
    b=$(ir $kind $((2 * N)))
    per[$kind]=$(echo "($b - $a) / $N" | bc -l)
    printf '%-7s %14s %14s %12.0f\n' $kind "$a" "$b" "${per[$kind]}"
done
printf 'RATIO null / ours on memory = %.3f   null / ours on Redis = %.3f   (instructions; N=%s, %s workers)\n' \
    "$(echo "${per[null]} / ${per[memory]}" | bc -l)" "$(echo "${per[null]} / ${per[redis]}" | bc -l)" "$N" "$WORKERS"
