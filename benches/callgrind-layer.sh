#!/usr/bin/env bash
# Instructions per request through an axum router: bare, behind ratelimit-tower (memory
# store, token bucket per address), behind tower_governor; each with and without headers.
# Only what runs inside the bench's `run` (the requests) is counted, and (Ir(3N) - Ir(N)) / 2N
# cancels the warm-up, so the ratio of the layers' overheads holds on a busy machine, which
# timings do not. Counting the whole process would take in quanta's calibration (governor's
# clock, built with tower_governor's router), which loops for a stretch of wall time: its
# count differs between the two runs by up to ~1,000 Ir per request of `theirs`.
# Usage: benches/callgrind-layer.sh [N]   (needs `apt-get install valgrind`)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4000}
cargo bench --locked -p ratelimit-tower --bench layer --no-run >&2 2>/dev/null
bin=$(ls -t target/release/deps/layer-* | grep -v '\.d$' | head -1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ir() {
    LAYER_BENCH_ONLY="$1:$2" valgrind --tool=callgrind --collect-atstart=no \
        --toggle-collect='layer::run' --callgrind-out-file="$out/cg.$1.$2" \
        "$bin" >/dev/null 2>"$out/log"
    grep -E '^(summary|totals):' "$out/cg.$1.$2" | head -1 | awk '{print $2}'
}
declare -A per
printf '%-15s %12s\n' router "Ir/request"
for v in bare ours theirs ours-ietf theirs-headers; do
    a=$(ir "$v" "$n")
    b=$(ir "$v" $((3 * n)))
    per[$v]=$(echo "($b - $a) / (2 * $n)" | bc -l)
    printf '%-15s %12.0f\n' "$v" "${per[$v]}"
done
ratio() { echo "(${per[$1]} - ${per[bare]}) / (${per[$2]} - ${per[bare]})" | bc -l; }
printf 'overhead ratio, headers off: %.3f; headers on (ietf / use_headers): %.3f (target <= 1.5)\n' \
    "$(ratio ours theirs)" "$(ratio ours-ietf theirs-headers)"
