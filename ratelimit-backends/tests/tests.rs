//! Every store against real servers started on loopback ports: Redis (single, Cluster of
//! three masters, behind Sentinel, with a per-second instance; every algorithm) and
//! memcached (two nodes, over TLS, and from a DNS SRV record).
//! The servers come from Debian's packages, installed by `scripts/test.sh`.

mod conformance;
mod fault;
mod memcached;
mod memcached_algorithms;
mod redis_algorithms;
mod redis_claims;
mod redis_keys;
mod redis_scripts;
mod saturation;
/// What `CounterStore::get` takes for reading fixed-window counters by key: "" reads
/// nothing (an increment of another algorithm).
pub fn reads(keys: &[&str]) -> Vec<ratelimit_core::Increment> {
    keys.iter()
        .map(|k| {
            let read = ratelimit_core::Increment::window(*k, 0, ratelimit_core::Unit::Hour, 0);
            if k.is_empty() {
                ratelimit_core::Increment {
                    op: ratelimit_core::Op::Slide {
                        window_us: 1_000_000,
                        now_us: 0,
                    },
                    ..read
                }
            } else {
                read
            }
        })
        .collect()
}

/// The store launchers, from the `test-support` crate.
mod servers {
    pub use test_support::dns::SrvDns;
    pub use test_support::net::free_port;
    pub use test_support::stores::*;
    pub use test_support::tls::{Pki, pki};

    pub fn temp_dir(tag: &str) -> std::path::PathBuf {
        test_support::net::temp_dir("rl-store", tag)
    }
}
