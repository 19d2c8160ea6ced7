#!/usr/bin/env bash
# The embedded limiter against governor's keyed limiter, over several processes.
# Within one process the interleaved pairs agree to a few percent, but on this shared box
# the ratio moves by up to a third from one process to the next (hash seeds, heap layout,
# whichever core the scheduler picks), so one process's median is not the number to quote:
# this prints, per case, the median over RUNS processes of each process's median, with
# the range, and the median ns per descriptor decision of both sides.
#
# With BASELINE (an `engine` bench binary built from another commit, e.g. with
# `CARGO_TARGET_DIR=/tmp/t cargo bench -p ratelimit-benches --bench engine --no-run` in a
# worktree), the processes alternate baseline, current, baseline, ... and both are
# summarised: an optimisation's before/after from one stretch of machine weather.
# Usage: benches/governor-ratio.sh [RUNS] [BASELINE]   (default 9; seconds per run once built)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
baseline=${2:-}
bin=$(cargo bench --locked -p ratelimit-benches --bench engine --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine" and m.get("executable"):
        print(m["executable"])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$runs"); do
    # A filter that matches no criterion group: only the interleaved ratios run.
    if [ -n "$baseline" ]; then
        "$baseline" --bench no_criterion_group 2>/dev/null | grep '^RATIO' >>"$out/baseline"
    fi
    "$bin" --bench no_criterion_group 2>/dev/null | grep '^RATIO' >>"$out/current"
    echo "run $i of $runs done" >&2
done
summary() {
    python3 - "$1" "$2" <<'PY'
import re, statistics, sys
cases = {}
for line in open(sys.argv[1]):
    m = re.search(r'\((.*?), 1024 keys.*median ([0-9.]+).*target >= ([0-9.]+).*ours ([0-9.]+), governor ([0-9.]+)', line)
    if m:
        cases.setdefault(m.group(1), []).append(tuple(float(x) for x in m.group(2, 4, 5, 3)))
for case, rows in cases.items():
    r = [x[0] for x in rows]
    print(f"RATIO-PROCESSES{sys.argv[2]} limiter/governor_keyed ({case}): median {statistics.median(r):.3f} "
          f"over {len(r)} processes, range {min(r):.3f}-{max(r):.3f}; ns/descriptor: ours "
          f"{statistics.median(x[1] for x in rows):.1f}, governor {statistics.median(x[2] for x in rows):.1f}"
          f" (target >= {rows[0][3]})")
PY
}
if [ -n "$baseline" ]; then
    summary "$out/baseline" " [baseline]"
fi
summary "$out/current" ""
