# Sourced by the bench scripts: a scratch directory in $work and a list $pids of the
# processes they start, all stopped (by PID) and removed however the script exits.
# Usage (from the workspace root): . benches/lib.sh; scratch NAME
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
scratch() {
    work=$(mktemp -d "/tmp/rl-$1.XXXXXX")
    trap cleanup EXIT
}
