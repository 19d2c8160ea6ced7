//! Black-box tests: the real `ratelimit` binary on loopback ports.

mod algorithms;
mod algorithms_memcached;
mod algorithms_redis;
mod check_config;
mod common;
mod connections;
mod envoy;
mod envoy_rlqs;
mod envoy_rlqs_long;
mod fuzz_corpus;
mod grpc_face;
mod health_states;
mod http_face;
mod lifecycle;
mod observability;
mod rlqs_bad_input;
mod rlqs_face;
mod rlqs_replicas;
mod rules_files;
mod rules_util;
mod rules_xds;
mod stats_retention;
mod stores;
mod tls;
mod tracing_otlp;
