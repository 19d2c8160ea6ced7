//! Black-box tests: the examples, the `ratelimit` server and Redis as real processes on
//! loopback ports; the layer in process where a test must break its store or read its
//! statistics.

mod axum_example;
mod common;
mod failure;
mod fuzz_corpus;
mod shadow;
mod shared_redis;
mod tonic_example;
