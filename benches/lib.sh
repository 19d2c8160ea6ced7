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

# ticks PID: the CPU a process has used so far, user and system, in clock ticks (1/100 s).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# us_per ΔTICKS N: microseconds of CPU per item.
us_per() { echo "$1 * 10000 / $2" | bc -l; }

# run_delay_us PID: how long the threads of a process now running have waited runnable
# for a core so far, in microseconds (`/proc/PID/task/*/schedstat`, second field).
run_delay_us() { cat /proc/"$1"/task/*/schedstat | awk '{d += $2} END {printf "%d\n", d / 1000}'; }

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

# find_envoy: $ENVOY_BIN, else the one on PATH, else the one the test command installs.
find_envoy() {
    if [ -z "${ENVOY_BIN:-}" ]; then
        ENVOY_BIN=$(command -v envoy || true)
        # shellcheck source=/dev/null
        [ -n "$ENVOY_BIN" ] || source scripts/deps.d/envoy.sh
    fi
}

# setup_envoy_bench: what the Envoy benches share: Envoy found, the server, the null
# server and rl-http built ($bin), and the example's rule (`api_key`, never over) in
# $work/rt/config for start_ratelimit.
setup_envoy_bench() {
    find_envoy
    cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches \
        --bin rl-null-server --bin rl-http >&2
    bin=target/release
    mkdir -p "$work/rt/config"
    printf 'domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
        >"$work/rt/config/rl.yaml"
}

# start_envoy NAME FRONT_PORT GRPC_PORT: the example's Envoy on FRONT_PORT (app on +1,
# admin on +2) asking the rate limit service on GRPC_PORT, with ENVOY_CONCURRENCY workers (1).
start_envoy() {
    local name=$1 front=$2 grpc=$3
    sed -e "s/port_value: 10000}/port_value: $front}/" \
        -e "s/port_value: 10001}/port_value: $((front + 1))}/g" \
        -e "s/port_value: 9901}/port_value: $((front + 2))}/" \
        -e "s/port_value: 8081}/port_value: $grpc}/" \
        examples/envoy/envoy.yaml >"$work/$name.yaml"
    "$ENVOY_BIN" -c "$work/$name.yaml" --disable-hot-restart --concurrency "${ENVOY_CONCURRENCY:-1}" -l warning \
        --base-id-path "$work/$name.base-id" --use-dynamic-base-id >"$work/$name-envoy.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 300); do
        curl -fs -o /dev/null "http://127.0.0.1:$((front + 2))/ready" && return 0
        sleep 0.1
    done
    cat "$work/$name-envoy.log"
    exit 1
}
