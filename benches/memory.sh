#!/usr/bin/env bash
# Resident memory of the `ratelimit` server on the memory store:
#   1. holding COUNTERS live counters (distinct keys, HOUR window so none expire), and
#   2. holding OVERRIDES distinct override stats (per-request limits; STATS_DYNAMIC_CAP
#      raised so that every one of them is kept).
# VmRSS is read from /proc/<pid>/status before and after. Target: 1M counters < 64 MB.
# Usage: benches/memory.sh [COUNTERS=1000000] [OVERRIDES=100000]
# (BIN_DIR=DIR: run the `ratelimit` and `rl-load` found there, e.g. another commit's, unbuilt)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTERS=${1:-1000000}
OVERRIDES=${2:-100000}
. benches/lib.sh
scratch mem
if [ -n "${BIN_DIR:-}" ]; then
    bin=$BIN_DIR
else
    cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches --bin rl-load >&2
    bin=target/release
fi
mkdir -p "$work/rt/config"
cat >"$work/rt/config/api.yaml" <<'EOF'
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
EOF

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# measure NAME BASE_PORT COUNT LOAD_FLAGS... : one fresh server, RSS before and after.
measure() {
    local name=$1 base=$2 count=$3
    shift 3
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=$base DEBUG_HOST=127.0.0.1 DEBUG_PORT=$((base + 1)) \
        GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 2)) RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn \
        BACKEND_TYPE=memory STATS_DYNAMIC_CAP=$((OVERRIDES * 2)) \
        "$bin/ratelimit" >"$work/$name.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 100); do grep -q listening "$work/$name.log" 2>/dev/null && break; sleep 0.1; done
    local before
    before=$(rss "$pid")
    timeout 600 "$bin/rl-load" --target json --addr 127.0.0.1:$base --streams 32 \
        --count "$count" --keys "$count" --label "$name" "$@"
    sleep 1
    local after
    after=$(rss "$pid")
    printf 'MEMORY %s: %d entries, VmRSS %.1f MB before, %.1f MB after, %.0f bytes/entry\n' \
        "$name" "$count" "$(echo "$before / 1024" | bc -l)" "$(echo "$after / 1024" | bc -l)" \
        "$(echo "($after - $before) * 1024 / $count" | bc -l)"
    kill "$pid"
}

echo "== $(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg)"
measure counters 18380 "$COUNTERS"
measure overrides 18480 "$OVERRIDES" --override
