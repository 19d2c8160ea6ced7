#!/usr/bin/env bash
# Envoy as the client shape (issue #30): how many HTTP requests a second a real Envoy
# (concurrency 1, examples/envoy/envoy.yaml, each request asking the rate limit service
# first) passes, closed loop, with the null gRPC server, ours on the memory store and ours on
# Redis behind it. Three Envoys, one per service, loaded in turn by rl-http (64 keep-alive
# connections, each sending as soon as it is answered, so up to 64 ShouldRateLimit streams
# at once on Envoy's one connection to the service); ratios against the null server in the
# same round, then medians. Targets as for the other shapes: memory >= 0.95x null, Redis
# >= 0.85x null.
# Usage: benches/envoy-closed.sh [DURATION_SECS=5] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-5}
ROUNDS=${2:-5}
REDIS_PORT=16498
. benches/lib.sh
scratch envoy-closed
setup_envoy_bench

# The PIDs of each side's rate limit service and Envoy, for their CPU per request.
declare -A service envoy
start_redis $REDIS_PORT
redis_pid=${pids[-1]}
start_ratelimit redis 18480 BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT
service[redis]=${pids[-1]}
start_ratelimit memory 18484 BACKEND_TYPE=memory
service[memory]=${pids[-1]}
"$bin/rl-null-server" 127.0.0.1:18488 >"$work/null.log" 2>&1 &
pids+=($!)
service[null]=$!
declare -A front=([redis]=18500 [memory]=18510 [null]=18520)
declare -A grpc=([redis]=18480 [memory]=18484 [null]=18488)
for side in redis memory null; do
    start_envoy "$side" "${front[$side]}" "${grpc[$side]}"
    envoy[$side]=${pids[-1]}
done
for side in redis memory null; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'x-api-key: warm' "http://127.0.0.1:${front[$side]}/")
    [ "$code" = 200 ] || { echo "Envoy in front of $side answered $code"; exit 1; }
done

echo "== $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); closed loop, 64 connections, ${DURATION}s"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A ratios
for r in $(seq "$ROUNDS"); do
    declare -A rate=()
    for side in null memory redis; do
        e0=$(ticks "${envoy[$side]}") s0=$(ticks "${service[$side]}") r0=$(ticks "$redis_pid")
        t0=$(awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat)
        line=$("$bin/rl-http" --addr "127.0.0.1:${front[$side]}" --rate 0 --conns 64 \
            --duration "$DURATION" --label "envoy_$side")
        e1=$(ticks "${envoy[$side]}") s1=$(ticks "${service[$side]}") r1=$(ticks "$redis_pid")
        t1=$(awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat)
        n=$(echo "$line" | field sent)
        echo "round $r $line"
        # Where the two cores went, per request: the rest is the generator and the kernel's
        # interrupt work.
        printf '  CPU us per request: all %.1f, Envoy %.1f, service %.1f, Redis %.1f\n' \
            "$(us_per $((t1 - t0)) "$n")" "$(us_per $((e1 - e0)) "$n")" \
            "$(us_per $((s1 - s0)) "$n")" "$(us_per $((r1 - r0)) "$n")"
        [ "$(echo "$line" | field non200)" = 0 ] || { echo "non-200 answers"; exit 1; }
        rate[$side]=$(echo "$line" | field rate)
    done
    m=$(echo "scale=3; ${rate[memory]} / ${rate[null]}" | bc)
    d=$(echo "scale=3; ${rate[redis]} / ${rate[null]}" | bc)
    echo "round $r: memory/null $m, redis/null $d"
    ratios[memory]+="$m " ratios[redis]+="$d "
done
# Envoy fails open (failure_mode_deny: false): a service that errored would still pass
# requests, so each Envoy's counters must show only answered calls.
for side in redis memory null; do
    stats=$(curl -fs "http://127.0.0.1:$((front[$side] + 2))/stats?filter=ratelimit")
    echo "envoy in front of $side: $(echo "$stats" | grep -E '\.ratelimit\.(ok|error|failure_mode_allowed):' | tr '\n' ' ')"
    if echo "$stats" | grep -qE '\.ratelimit\.(error|failure_mode_allowed): [1-9]'; then
        echo "Envoy in front of $side saw rate limit service errors"; exit 1
    fi
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }
echo "MEDIAN envoy: memory/null $(med "${ratios[memory]}") (target >= 0.95), redis/null $(med "${ratios[redis]}") (target >= 0.85)"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
