# Sourced by the bench scripts: a scratch directory in $work and a list $pids of the
# processes they start, all stopped (by PID) and removed however the script exits.
# Usage (from the workspace root): . benches/lib.sh; scratch NAME
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
scratch() {
    work=$(mktemp -d "/tmp/rl-$1.XXXXXX")
    trap cleanup EXIT
}

# start_redis PORT: a throwaway Redis on loopback (no persistence), ready when this returns.
start_redis() {
    redis-server --bind 127.0.0.1 --port "$1" --save "" --appendonly no \
        --daemonize no --logfile "$work/redis-$1.log" &
    pids+=($!)
    for _ in $(seq 50); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "redis on $1 did not start"; exit 1
}

# start_ratelimit NAME GRPC_PORT [ENV=VALUE...]: $bin/ratelimit with the rules in
# $work/rt/config, gRPC on GRPC_PORT, HTTP on +1 and debug on +2, all on loopback; waits
# until it listens.
start_ratelimit() {
    local name=$1 port=$2
    shift 2
    env -i PATH="$PATH" GRPC_HOST=127.0.0.1 GRPC_PORT="$port" HOST=127.0.0.1 \
        PORT=$((port + 1)) DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((port + 2)) \
        RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn USE_STATSD=false "$@" \
        "$bin/ratelimit" >"$work/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q listening "$work/$name.log" && return 0; sleep 0.1; done
    cat "$work/$name.log"
    exit 1
}
