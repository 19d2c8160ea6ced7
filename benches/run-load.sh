#!/usr/bin/env bash
# Server load benchmark in one go, denominators measured right next to numerators because
# on a shared 2-core machine only same-run ratios are stable (docs/benchmarks.md):
#   1. Redis ceiling: redis-benchmark INCR -c 50 -P 1 and -P 16, alternating with
#      our server on Redis (gRPC, 1 descriptor, 64 streams);  ratio >= 1.0 vs -P 1.
#      The load comes from rl-load's raw HTTP/2 client (--raw), the counterpart of
#      redis-benchmark's own lean client, on 2 connections of 32 streams (Envoy's shape with
#      2 worker threads); next to it the same client on one connection, and tonic's client
#      (12-18 us of the shared cores per call, so that ratio mostly measures the client).
#      Each round prints the CPU each process spent per decision (load generator, server,
#      Redis) and Redis's CPU per INCR under -P 1: on 2 shared cores, where the ratio goes
#   2. p99 at a fixed offered load of 20,000 decisions/s on Redis; target < 1 ms. Next to
#      it, the null server at the same load (what this box allows a server that does
#      nothing), and the pacer's own lateness (how late a plain thread wakes here); with
#      the raw client (the target) and with tonic's
#   3. our server on the memory store vs the null gRPC server (same stack), alternating;
#      ratio >= 0.8, with tonic's client and the raw one; plus /json for reference
# Everything listens on loopback, is stopped by PID, and each run is bounded by DURATION.
# Usage: benches/run-load.sh [DURATION_SECS=5] [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
REPS=${2:-3}
STREAMS=64
REDIS_PORT=16399
. benches/lib.sh
scratch load

cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches \
    --bin rl-load --bin rl-null-server >&2
bin=target/release

echo "== $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== load average: $(cut -d' ' -f1-3 /proc/loadavg); $(redis-server --version | cut -d' ' -f1-3)"

redis-server --bind 127.0.0.1 --port $REDIS_PORT --save "" --appendonly no \
    --protected-mode yes --daemonize no --logfile "$work/redis.log" &
redis_pid=$!
pids+=($redis_pid)

mkdir -p "$work/rt/config"
cat >"$work/rt/config/api.yaml" <<'EOF'
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
EOF

# start_server NAME PORT_BASE ENV... : starts `ratelimit`, waits for its ports.
start_server() {
    local name=$1 base=$2
    shift 2
    env -i PATH="$PATH" HOST=127.0.0.1 PORT=$((base)) DEBUG_HOST=127.0.0.1 \
        DEBUG_PORT=$((base + 1)) GRPC_HOST=127.0.0.1 GRPC_PORT=$((base + 2)) \
        RUNTIME_ROOT="$work/rt" LOG_LEVEL=warn "$@" \
        "$bin/ratelimit" >"$work/$name.log" 2>&1 &
    pids+=($!)
    declare -g "pid_$name=$!"
    for _ in $(seq 100); do
        grep -q "listening" "$work/$name.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$name did not start:"; cat "$work/$name.log"; exit 1
}

for _ in $(seq 50); do redis-cli -p $REDIS_PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
start_server redis 18180 BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT
start_server memory 18280 BACKEND_TYPE=memory
"$bin/rl-null-server" 127.0.0.1:18291 >"$work/null.log" 2>&1 &
pids+=($!)
sleep 0.5

load() { timeout $((DURATION + 30)) "$bin/rl-load" --duration "$DURATION" --streams $STREAMS --warmup 20 "$@"; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
rb() {
    timeout 120 redis-benchmark -p $REDIS_PORT -t incr -c 50 -P "$1" -n "$2" -q 2>/dev/null |
        tr '\r' '\n' | sed -n 's/^INCR: \([0-9.]*\) requests per second.*/\1/p' | tail -1
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

r_p1=() r_p1one=() r_p1tonic=() r_mem=() r_memraw=() r_rcpu=()
for rep in $(seq "$REPS"); do
    echo "-- round $rep"
    p1_n=$((150000 * DURATION / 5))
    r0=$(ticks $redis_pid)
    p1=$(rb 1 $p1_n)
    r1=$(ticks $redis_pid)
    p16=$(rb 16 $((1000000 * DURATION / 5)))
    r2=$(ticks $redis_pid) s2=$(ticks $pid_redis)
    ours_line=$(load --raw --conns 2 --addr 127.0.0.1:18182 --label redis_grpc_raw2)
    r3=$(ticks $redis_pid) s3=$(ticks $pid_redis)
    ours=$(echo "$ours_line" | field rate)
    ours_n=$(echo "$ours_line" | field decisions)
    one_line=$(load --raw --addr 127.0.0.1:18182 --label redis_grpc_raw1)
    tonic_line=$(load --addr 127.0.0.1:18182 --label redis_grpc_tonic)
    echo "redis-benchmark INCR -c 50 -P 1: $p1/s   -P 16: $p16/s"
    echo "$ours_line"
    echo "$one_line"
    echo "$tonic_line"
    ratio=$(echo "$ours / $p1" | bc -l)
    one=$(echo "$(echo "$one_line" | field rate) / $p1" | bc -l)
    ton=$(echo "$(echo "$tonic_line" | field rate) / $p1" | bc -l)
    printf 'RATIO server_on_redis / redis_incr_P1 = %.3f   / P16 = %.3f   (target >= 1.0 vs P1);  one connection / P1 = %.3f   tonic client / P1 = %.3f\n' \
        "$ratio" "$(echo "$ours / $p16" | bc -l)" "$one" "$ton"
    r_p1+=("$ratio") r_p1one+=("$one") r_p1tonic+=("$ton")
    # Where the 2 cores went: what each process spent per decision, and what Redis spent
    # per INCR under redis-benchmark -P 1 (one round trip per command, nothing shared).
    rd=$(us_per $((r3 - r2)) "$ours_n") rp=$(us_per $((r1 - r0)) $p1_n)
    printf 'CPU us per decision: load generator %s, server %.1f, Redis %.1f;  Redis per INCR under -P 1: %.1f (%.2fx a decision)\n' \
        "$(echo "$ours_line" | field load_cpu_us)" "$(us_per $((s3 - s2)) "$ours_n")" "$rd" "$rp" \
        "$(echo "$rp / $rd" | bc -l)"
    r_rcpu+=("$(echo "$rp / $rd" | bc -l)")

    mem_line=$(load --addr 127.0.0.1:18282 --label memory_grpc_tonic)
    null_line=$(load --addr 127.0.0.1:18291 --label null_grpc_tonic)
    memraw_line=$(load --raw --addr 127.0.0.1:18282 --label memory_grpc_raw1)
    nullraw_line=$(load --raw --addr 127.0.0.1:18291 --label null_grpc_raw1)
    printf '%s\n' "$mem_line" "$null_line" "$memraw_line" "$nullraw_line"
    ratio=$(echo "$(echo "$mem_line" | field rate) / $(echo "$null_line" | field rate)" | bc -l)
    raw=$(echo "$(echo "$memraw_line" | field rate) / $(echo "$nullraw_line" | field rate)" | bc -l)
    printf 'RATIO server_on_memory / null_server = %.3f   (target >= 0.8);  raw client: %.3f\n' "$ratio" "$raw"
    r_mem+=("$ratio") r_memraw+=("$raw")
done

echo "-- fixed offered load, open loop: 20000 decisions/s on Redis (target p99 < 1 ms) and on"
echo "   the null server, raw client then tonic's, alternating; then 5000/s on Redis"
r_p99=() n_p99=() t_p99=() tn_p99=()
for rep in $(seq "$REPS"); do
    redis_line=$(load --raw --addr 127.0.0.1:18182 --rate 20000 --label redis_grpc_raw_20k)
    null_line=$(load --raw --addr 127.0.0.1:18291 --rate 20000 --label null_grpc_raw_20k)
    tonic_line=$(load --addr 127.0.0.1:18182 --rate 20000 --label redis_grpc_tonic_20k)
    tnull_line=$(load --addr 127.0.0.1:18291 --rate 20000 --label null_grpc_tonic_20k)
    printf '%s\n' "$redis_line" "$null_line" "$tonic_line" "$tnull_line"
    r_p99+=("$(echo "$redis_line" | field p99_us)")
    n_p99+=("$(echo "$null_line" | field p99_us)")
    t_p99+=("$(echo "$tonic_line" | field p99_us)")
    tn_p99+=("$(echo "$tnull_line" | field p99_us)")
done
load --raw --addr 127.0.0.1:18182 --rate 5000 --label redis_grpc_raw_5k
echo "-- /json on the memory store and on Redis (closed loop, 64 connections)"
load --target json --addr 127.0.0.1:18280 --label memory_json
load --target json --addr 127.0.0.1:18180 --label redis_json

med() { printf '%s\n' "$@" | median; }
echo "== medians over $REPS rounds"
printf 'MEDIAN server_on_redis / redis_incr_P1 = %.3f  (target >= 1.0; raw client, 2 connections)\n' "$(med "${r_p1[@]}")"
printf 'MEDIAN   one connection: %.3f   tonic client: %.3f\n' "$(med "${r_p1one[@]}")" "$(med "${r_p1tonic[@]}")"
printf 'MEDIAN Redis CPU per -P 1 INCR / per decision of ours = %.2f\n' "$(med "${r_rcpu[@]}")"
printf 'MEDIAN server_on_memory / null_server = %.3f  (target >= 0.8);  raw client: %.3f\n' \
    "$(med "${r_mem[@]}")" "$(med "${r_memraw[@]}")"
printf 'MEDIAN p99 at 20000/s on Redis: %s us, null server %s us  (target Redis < 1000 us; raw client)\n' \
    "$(med "${r_p99[@]}")" "$(med "${n_p99[@]}")"
printf 'MEDIAN   tonic client: Redis %s us, null server %s us\n' "$(med "${t_p99[@]}")" "$(med "${tn_p99[@]}")"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
