#!/usr/bin/env bash
# Architecture invariant: the pure crates pull in no runtime, transport, store client or
# file watcher. `cargo tree -e normal` lists what a user of the crate compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(tokio|hyper|tonic|fred|redis|async-memcached|mio|socket2|notify|h2|reqwest|rusqlite) '
status=0
for crate in ratelimit-core trading-model relay-templates gql-demo; do
    if ! cargo metadata --format-version 1 --no-deps --locked 2>/dev/null | grep -q "\"name\":\"$crate\""; then
        continue
    fi
    bad=$(cargo tree -p "$crate" -e normal --prefix none --locked | sort -u | grep -E "$forbidden" || true)
    if [ -n "$bad" ]; then
        echo "dependency-direction check FAILED: $crate depends on:"
        echo "$bad"
        status=1
    else
        echo "dependency-direction check: $crate is pure"
    fi
done
exit $status
