//! Black-box tests: the real `ratelimit` binary on loopback ports.

mod common;
mod http_face;
mod lifecycle;
