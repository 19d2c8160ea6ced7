//! Black-box tests: the real `ratelimit` binary on loopback ports.

mod algorithms;
mod algorithms_memcached;
mod algorithms_redis;
mod buildah;
mod check_config;
mod common;
mod connections;
mod container;
mod deploy_metrics;
mod envoy;
mod envoy_example;
mod envoy_rlqs;
mod fuzz_corpus;
mod grpc_face;
mod health_states;
mod http_face;
mod lifecycle;
mod observability;
mod rlqs_face;
mod rules_files;
mod rules_util;
mod rules_xds;
mod stats_retention;
mod stores;
mod tls;
mod tracing_otlp;
