#!/usr/bin/env bash
# GraphQL demo, outside clients against the real binary on a free loopback port:
# graphql-js builds a client schema from introspection and validates queries, and headless
# Chromium runs a query in the explorer served with local assets (screenshot under
# target/gql-screenshots/, or GQL_SCREENSHOT_DIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -p gql-server --bin gql-demo --locked
cd servers/gql/tests/js
timeout 600 node --test --test-concurrency=1 introspection.test.mjs explorer.test.mjs
