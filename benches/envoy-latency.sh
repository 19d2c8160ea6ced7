#!/usr/bin/env bash
# The latency Envoy adds when it asks our server on Redis, against the same Envoy asking
# the null gRPC server (which answers OK at once): two Envoys (concurrency 1) from
# examples/envoy/envoy.yaml, each with its direct-response app, loaded in turn by rl-http
# at a fixed rate (each request timed from when it was due). Prints each round's p50/p99
# and, at the end, the medians and the difference ours - null.
# Usage: benches/envoy-latency.sh [RATE=2000] [DURATION_SECS=5] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-2000}
DURATION=${2:-5}
ROUNDS=${3:-5}
REDIS_PORT=16499
. benches/lib.sh
scratch envoy-latency
setup_envoy_bench

start_redis $REDIS_PORT
start_ratelimit ours 18580 BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:$REDIS_PORT
"$bin/rl-null-server" 127.0.0.1:18592 >"$work/null.log" 2>&1 &
pids+=($!)

start_envoy ours 18600 18580
start_envoy null 18610 18592
for port in 18600 18610; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'x-api-key: warm' "http://127.0.0.1:$port/")
    [ "$code" = 200 ] || { echo "Envoy on $port answered $code"; exit 1; }
done

echo "== $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $RATE/s for ${DURATION}s, 16 connections"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A p50 p99 s50 s99
for r in $(seq "$ROUNDS"); do
    for side in ours null; do
        port=18600
        [ $side = null ] && port=18610
        line=$("$bin/rl-http" --addr "127.0.0.1:$port" --rate "$RATE" --duration "$DURATION" \
            --label "$side")
        echo "round $r $line"
        [ "$(echo "$line" | field non200)" = 0 ] || { echo "non-200 answers"; exit 1; }
        p50[$side]+="$(echo "$line" | field p50_us) "
        p99[$side]+="$(echo "$line" | field p99_us) "
        s50[$side]+="$(echo "$line" | field send_p50_us) "
        s99[$side]+="$(echo "$line" | field send_p99_us) "
    done
done
m() { tr ' ' '\n' <<<"$1" | grep . | median; }
o50=$(m "${p50[ours]}") n50=$(m "${p50[null]}") o99=$(m "${p99[ours]}") n99=$(m "${p99[null]}")
echo "median of $ROUNDS rounds: ours (Redis) p50 ${o50} us p99 ${o99} us; null p50 ${n50} us p99 ${n99} us"
echo "added by our server on Redis over the null server: p50 $((o50 - n50)) us, p99 $((o99 - n99)) us"
o50=$(m "${s50[ours]}") n50=$(m "${s50[null]}") o99=$(m "${s99[ours]}") n99=$(m "${s99[null]}")
echo "timed from the send: ours p50 ${o50} us p99 ${o99} us; null p50 ${n50} us p99 ${n99} us; added p50 $((o50 - n50)) us, p99 $((o99 - n99)) us"
