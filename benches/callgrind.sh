#!/usr/bin/env bash
# Instructions per decision, deterministic on a noisy machine: run N and 2N decisions
# under callgrind and take (Ir(2N) - Ir(N)) / N, which cancels start-up and warm-up.
# Usage: benches/callgrind.sh [N]   (needs `apt-get install valgrind`)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
cargo build --release --locked -p ratelimit-benches --bin rl-decide-n >&2
bin=target/release/rl-decide-n
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ir() {
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1.$2" "$bin" "$1" "$2" >/dev/null 2>"$out/log"
    grep -E '^(summary|totals):' "$out/cg.$1.$2" | head -1 | awk '{print $2}'
}
printf '%-11s %14s %14s %12s\n' kind "Ir(N)" "Ir(2N)" "Ir/decision"
for kind in limiter1 limiter1now limiter1owned limiter1block limiter3 pure200 limiter200; do
    a=$(ir "$kind" "$n")
    b=$(ir "$kind" $((2 * n)))
    printf '%-11s %14s %14s %12.1f\n' "$kind" "$a" "$b" "$(echo "($b - $a) / $n" | bc -l)"
done
echo "(target: < 1000 Ir per single-descriptor decision. limiter1: async API awaited in a task; limiter1now: sync API; limiter1block: async API with an executor entered per decision; limiter3 and limiter200 per request)"
