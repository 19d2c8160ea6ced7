#!/usr/bin/env bash
# Regenerates the committed gRPC/protobuf code after a change under servers/ratelimit/proto.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --manifest-path tools/protogen/Cargo.toml
cargo fmt --all
