//! Black-box tests: the real `ratelimit` binary on loopback ports.

mod common;
mod grpc_face;
mod http_face;
mod lifecycle;
mod tls;
