#!/usr/bin/env bash
# Fuzzes every target in turn for SECONDS each (default 300) and prints one line per
# target: its runs, or the first lines of its failure. New inputs go to a scratch
# directory, so the tracked corpus is read, never rewritten; a failing input is left in
# fuzz/artifacts/TARGET/ (add it to fuzz/corpus/TARGET/ with the fix). Needs cargo-fuzz
# and a nightly toolchain. Exits 1 if any target failed.
#   fuzz/run-all.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")"
seconds=${1:-300}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=0
for t in "${targets[@]}"; do
    mkdir -p "$scratch/$t"
    log="$scratch/$t.log"
    if cargo +nightly fuzz run -O "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 >"$log" 2>&1; then
        printf '%-24s ok   %s\n' "$t" "$(grep -o '^Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1)"
    else
        failed=1
        printf '%-24s FAIL\n' "$t"
        # The panic and its message, else libFuzzer's own verdict, else cargo's error.
        { grep -m1 -A1 'panicked at' "$log" ||
            grep -m1 -E 'ERROR: libFuzzer|SUMMARY: libFuzzer' "$log" ||
            grep -m1 -A3 '^error' "$log"; } | sed 's/^/    /'
    fi
done
exit "$failed"
