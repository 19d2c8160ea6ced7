#!/usr/bin/env bash
# Server load benchmark in one go, denominators measured right next to numerators because
# on a shared 2-core machine only same-run ratios are stable (docs/benchmarks.md):
#   1. Redis ceiling: redis-benchmark INCR -c 50 -P 1 and -P 16, alternating with
#      our server on Redis (gRPC, 1 descriptor, 64 streams);  ratio >= 1.0 vs -P 1.
#      Each round also prints the CPU each process spent per decision (load generator,
#      server, Redis) and Redis's CPU per INCR under -P 1: on 2 shared cores, where the
#      ratio goes
#   2. p99 at a fixed offered load of 20,000 decisions/s on Redis; target < 1 ms. Next to
#      it, the null server at the same load (what this box allows a server that does
#      nothing), and the pacer's own lateness (how late a plain thread wakes here)
#   3. our server on the memory store vs the null gRPC server (same stack), alternating;
#      ratio >= 0.8; plus /json on the memory store for reference
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
# The same server on one runtime worker: on this box it shares 2 cores with Redis and the
# load generator, and one worker leaves them a core (tokio reads TOKIO_WORKER_THREADS).
start_server redis1w 18380 BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT \
    TOKIO_WORKER_THREADS=1
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
# CPU time (user + system, in 10 ms ticks) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# us_per ΔTICKS N: microseconds of CPU per item.
us_per() { echo "$1 * 10000 / $2" | bc -l; }

r_p1=() r_p1w=() r_mem=() r_rcpu=()
for rep in $(seq "$REPS"); do
    echo "-- round $rep"
    p1_n=$((150000 * DURATION / 5))
    r0=$(ticks $redis_pid)
    p1=$(rb 1 $p1_n)
    r1=$(ticks $redis_pid)
    p16=$(rb 16 $((1000000 * DURATION / 5)))
    r2=$(ticks $redis_pid) s2=$(ticks $pid_redis)
    ours_line=$(load --addr 127.0.0.1:18182 --label redis_grpc)
    r3=$(ticks $redis_pid) s3=$(ticks $pid_redis)
    ours=$(echo "$ours_line" | field rate)
    ours_n=$(echo "$ours_line" | field decisions)
    one_line=$(load --addr 127.0.0.1:18382 --label redis_grpc_1worker)
    echo "redis-benchmark INCR -c 50 -P 1: $p1/s   -P 16: $p16/s"
    echo "$ours_line"
    echo "$one_line"
    ratio=$(echo "$ours / $p1" | bc -l)
    printf 'RATIO server_on_redis / redis_incr_P1 = %.3f   / P16 = %.3f   one worker / P1 = %.3f   (target >= 1.0 vs P1)\n' \
        "$ratio" "$(echo "$ours / $p16" | bc -l)" "$(echo "$(echo "$one_line" | field rate) / $p1" | bc -l)"
    r_p1+=("$ratio")
    # Where the 2 cores went: what each process spent per decision, and what Redis spent
    # per INCR under redis-benchmark -P 1 (one round trip per command, nothing shared).
    rd=$(us_per $((r3 - r2)) "$ours_n") rp=$(us_per $((r1 - r0)) $p1_n)
    printf 'CPU us per decision: load generator %s, server %.1f, Redis %.1f;  Redis per INCR under -P 1: %.1f (%.2fx a decision)\n' \
        "$(echo "$ours_line" | field load_cpu_us)" "$(us_per $((s3 - s2)) "$ours_n")" "$rd" "$rp" \
        "$(echo "$rp / $rd" | bc -l)"
    r_rcpu+=("$(echo "$rp / $rd" | bc -l)")
    r_p1w+=("$(echo "$(echo "$one_line" | field rate) / $p1" | bc -l)")

    mem_line=$(load --addr 127.0.0.1:18282 --label memory_grpc)
    null_line=$(load --addr 127.0.0.1:18291 --label null_grpc)
    echo "$mem_line"
    echo "$null_line"
    ratio=$(echo "$(echo "$mem_line" | field rate) / $(echo "$null_line" | field rate)" | bc -l)
    printf 'RATIO server_on_memory / null_server = %.3f   (target >= 0.8)\n' "$ratio"
    r_mem+=("$ratio")
done

echo "-- fixed offered load, open loop: 20000 decisions/s on Redis (target p99 < 1 ms), the"
echo "   memory store and the null server alternating; then 5000/s on Redis"
r_p99=() w_p99=() n_p99=()
for rep in $(seq "$REPS"); do
    redis_line=$(load --addr 127.0.0.1:18182 --rate 20000 --label redis_grpc_20k)
    echo "$redis_line"
    one_line=$(load --addr 127.0.0.1:18382 --rate 20000 --label redis_grpc_1worker_20k)
    echo "$one_line"
    load --addr 127.0.0.1:18282 --rate 20000 --label memory_grpc_20k
    null_line=$(load --addr 127.0.0.1:18291 --rate 20000 --label null_grpc_20k)
    echo "$null_line"
    r_p99+=("$(echo "$redis_line" | field p99_us)")
    w_p99+=("$(echo "$one_line" | field p99_us)")
    n_p99+=("$(echo "$null_line" | field p99_us)")
done
load --addr 127.0.0.1:18182 --rate 5000 --label redis_grpc_5k
echo "-- /json on the memory store and on Redis (closed loop, 64 connections)"
load --target json --addr 127.0.0.1:18280 --label memory_json
load --target json --addr 127.0.0.1:18180 --label redis_json

echo "== medians over $REPS rounds"
printf 'MEDIAN server_on_redis / redis_incr_P1 = %.3f  (target >= 1.0)\n' \
    "$(printf '%s\n' "${r_p1[@]}" | median)"
printf 'MEDIAN Redis CPU per -P 1 INCR / per decision of ours = %.2f\n' \
    "$(printf '%s\n' "${r_rcpu[@]}" | median)"
printf 'MEDIAN server_on_memory / null_server = %.3f  (target >= 0.8)\n' \
    "$(printf '%s\n' "${r_mem[@]}" | median)"
printf 'MEDIAN server_on_redis, one worker / redis_incr_P1 = %.3f\n' \
    "$(printf '%s\n' "${r_p1w[@]}" | median)"
printf 'MEDIAN p99 at 20000/s: Redis %s us, Redis on one worker %s us, null server %s us  (target Redis < 1000 us)\n' \
    "$(printf '%s\n' "${r_p99[@]}" | median)" "$(printf '%s\n' "${w_p99[@]}" | median)" \
    "$(printf '%s\n' "${n_p99[@]}" | median)"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
