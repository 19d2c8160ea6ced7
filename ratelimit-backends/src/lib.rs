//! Counter stores for `ratelimit-core`, and the real clock.
//!
//! Each store implements [`ratelimit_core::CounterStore`]: it adds hits to keys atomically
//! and expires them, nothing more. Which keys to count, and what the counts mean, is
//! decided in the core. The in-process [`MemoryStore`] (feature `memory`, on by default) is
//! for single-instance servers, embedding and tests; shared stores come behind features.
//!
//! What this crate deliberately does not do: match rules, build keys, or choose a store from
//! settings (the server shell does that).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "memory")]
mod memory;

#[cfg(feature = "memory")]
pub use memory::MemoryStore;

#[cfg(feature = "redis")]
pub mod redis;
/// Our own RESP connection for counting; public only for the fuzz target.
#[cfg(feature = "redis")]
#[doc(hidden)]
pub mod redis_mux;

#[cfg(feature = "redis")]
pub use redis::RedisStore;

#[cfg(feature = "memcached")]
pub mod memcached;

#[cfg(any(feature = "redis", feature = "memcached"))]
pub mod client_tls;

#[cfg(feature = "memcached")]
pub use memcached::MemcachedStore;

use std::time::{SystemTime, UNIX_EPOCH};

/// The system's wall clock, in whole Unix seconds (upstream's resolution).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl ratelimit_core::Clock for SystemClock {
    fn now(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}
