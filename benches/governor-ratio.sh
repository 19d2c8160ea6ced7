#!/usr/bin/env bash
# The embedded limiter against governor's keyed limiter, over several processes.
# Within one process the interleaved pairs agree to a few percent, but on this shared box
# the ratio moves by up to a third from one process to the next (hash seeds, heap layout,
# whichever core the scheduler picks), so one process's median is not the number to quote:
# this prints, per case, the median over RUNS processes of each process's median, with
# the range, and the median ns per descriptor decision of both sides.
# Usage: benches/governor-ratio.sh [RUNS]   (default 9; a few seconds per run once built)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
cargo bench --locked -p ratelimit-benches --bench engine --no-run >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq "$runs"); do
    # A filter that matches no criterion group: only the interleaved ratios run.
    cargo bench --locked -p ratelimit-benches --bench engine -- no_criterion_group 2>/dev/null \
        | grep '^RATIO' >>"$out"
    echo "run $i of $runs done" >&2
done
python3 - "$out" "$runs" <<'PY'
import re, statistics, sys
cases = {}
for line in open(sys.argv[1]):
    m = re.search(r'\((.*?), 1024 keys.*median ([0-9.]+).*ours ([0-9.]+), governor ([0-9.]+)', line)
    if m:
        cases.setdefault(m.group(1), []).append(tuple(float(x) for x in m.group(2, 3, 4)))
for case, rows in cases.items():
    r = [x[0] for x in rows]
    print(f"RATIO-PROCESSES limiter/governor_keyed ({case}): median {statistics.median(r):.3f} "
          f"over {len(r)} processes, range {min(r):.3f}-{max(r):.3f}; ns/descriptor: ours "
          f"{statistics.median(x[1] for x in rows):.1f}, governor {statistics.median(x[2] for x in rows):.1f}"
          " (target >= 0.5)")
PY
