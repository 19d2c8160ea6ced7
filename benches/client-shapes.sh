#!/usr/bin/env bash
# Issue #30's benchmark: does the server keep up for every client shape, not only the one it
# was tuned with? For each shape (rl-load's raw client on 1 and 2 connections, tonic's on 2,
# the h2 crate's on 2; 64 streams, closed loop) the null gRPC server, ours on the memory
# store and ours on Redis run in turn; ratios are against the null server with the same
# client, in the same round. Then p99 at a fixed 20,000/s on Redis and on the null server,
# raw and h2 clients, alternating, ROUNDS times, each with how long Redis and the server
# waited for a core (runnable, not running). Prints medians at the end.
# Targets: Redis >= 0.85x null, memory >= 0.95x null; p99 on Redis <= 2x null's.
# Usage: [SHAPES="raw1 raw2 tonic h2"] benches/client-shapes.sh [DURATION_SECS=5] [REPS=3] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
REPS=${2:-3}
ROUNDS=${3:-5}
REDIS_PORT=16599
. benches/lib.sh
scratch shapes
cargo build --release --locked -p ratelimit-server --bin ratelimit -p ratelimit-benches \
    --bin rl-load --bin rl-null-server >&2
bin=target/release
mkdir -p "$work/rt/config"
printf 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' \
    >"$work/rt/config/api.yaml"
start_redis $REDIS_PORT
redis_pid=${pids[-1]}
start_ratelimit memory 18680 BACKEND_TYPE=memory
start_ratelimit redis 18690 BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT
declare -A server_pid=([redis]=${pids[-1]})
"$bin/rl-null-server" 127.0.0.1:18699 >"$work/null.log" 2>&1 &
pids+=($!)
server_pid[null]=$!
sleep 0.5
declare -A port=([null]=18699 [memory]=18680 [redis]=18690)
declare -A flags=([raw1]="--raw --conns 1" [raw2]="--raw --conns 2" [tonic]="--conns 2" [h2]="--h2 --conns 2")
shapes=(${SHAPES:-raw1 raw2 tonic h2})
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
load() {
    # shellcheck disable=SC2086
    timeout $((DURATION + 30)) "$bin/rl-load" --addr "127.0.0.1:${port[$1]}" --streams 64 \
        --warmup 20 --keys 1000 $2 "${@:3}"
}
echo "== $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $(redis-server --version | cut -d' ' -f3)"
declare -A ratios
for rep in $(seq "$REPS"); do
    for shape in "${shapes[@]}"; do
        declare -A rate=()
        for server in null memory redis; do
            line=$(load $server "${flags[$shape]}" --duration "$DURATION" --label "${shape}_$server")
            echo "$line" | cut -d' ' -f1-14
            rate[$server]=$(echo "$line" | field rate)
        done
        m=$(echo "scale=3; ${rate[memory]} / ${rate[null]}" | bc)
        r=$(echo "scale=3; ${rate[redis]} / ${rate[null]}" | bc)
        echo "round $rep $shape: memory/null $m, redis/null $r"
        ratios[$shape.memory]+="$m " ratios[$shape.redis]+="$r "
    done
done
declare -A p99s
for rep in $(seq "$ROUNDS"); do
    for shape in raw2 h2; do
        for server in redis null; do
            w0=$(run_delay_us "${server_pid[$server]}") r0=$(run_delay_us "$redis_pid")
            line=$(load $server "${flags[$shape]}" --rate 20000 --duration "$DURATION" \
                --label "${shape}_${server}_20k")
            w1=$(run_delay_us "${server_pid[$server]}") r1=$(run_delay_us "$redis_pid")
            echo "$line" | cut -d' ' -f1-14
            n=$(echo "$line" | field decisions)
            printf '  waiting for a core, us per decision: server %.2f, Redis %.2f\n' \
                "$(echo "($w1 - $w0) / $n" | bc -l)" "$(echo "($r1 - $r0) / $n" | bc -l)"
            p99s[$shape.$server]+="$(echo "$line" | field p99_us) "
        done
    done
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }
echo "== medians (closed loop over $REPS rounds; p99 over $ROUNDS)"
for shape in "${shapes[@]}"; do
    [ "$REPS" -gt 0 ] || break
    echo "MEDIAN $shape: memory/null $(med "${ratios[$shape.memory]}") (target >= 0.95), redis/null $(med "${ratios[$shape.redis]}") (target >= 0.85)"
done
for shape in raw2 h2; do
    [ "$ROUNDS" -gt 0 ] || break
    r=$(med "${p99s[$shape.redis]}") n=$(med "${p99s[$shape.null]}")
    echo "MEDIAN p99 at 20000/s, $shape: Redis ${r} us, null ${n} us, ratio $(echo "scale=2; $r / $n" | bc) (target <= 2)"
done
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
