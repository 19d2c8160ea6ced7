//! Black-box tests: the real `ratelimit` binary on loopback ports.

mod common;
mod envoy;
mod fuzz_corpus;
mod grpc_face;
mod http_face;
mod lifecycle;
mod stores;
// The store launchers of ratelimit-backends' tests, shared rather than copied.
#[path = "../../../ratelimit-backends/tests/servers.rs"]
#[allow(dead_code)]
mod store_servers;
mod tls;
