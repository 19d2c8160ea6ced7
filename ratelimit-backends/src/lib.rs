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

/// A byte stream a store's connection can run on: TCP, a Unix socket, TLS.
#[cfg(any(feature = "redis", feature = "memcached"))]
pub(crate) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
#[cfg(any(feature = "redis", feature = "memcached"))]
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The files of a committed cargo-fuzz corpus, for the tests that replay it on stable.
#[cfg(test)]
pub(crate) fn fuzz_corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
        .collect()
}

#[cfg(feature = "memcached")]
pub use memcached::MemcachedStore;

/// The system's wall clock: Unix seconds for window limits (upstream's resolution),
/// microseconds for token buckets and sliding windows. A time before the epoch (a clock
/// set wrong) reads as 0.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl ratelimit_core::Clock for SystemClock {
    fn now(&self) -> u64 {
        self.now_micros() / 1_000_000
    }

    #[cfg(target_os = "linux")]
    #[inline]
    fn now_micros(&self) -> u64 {
        // The timespec as libc reads it: std's `SystemTime` adds `duration_since` with its
        // checked arithmetic and a `Result`, which cost a decision more than its rule
        // lookup (docs/benchmarks.md).
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
        u64::try_from(t.tv_sec).map_or(0, |s| s.saturating_mul(1_000_000) + nanos / 1_000)
    }

    #[cfg(not(target_os = "linux"))]
    fn now_micros(&self) -> u64 {
        use std::time::{SystemTime, UNIX_EPOCH};
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod clock_tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use ratelimit_core::Clock;

    use super::SystemClock;

    #[test]
    fn the_system_clock_is_the_wall_clock_in_both_resolutions() {
        let micros = |t: SystemTime| {
            let d = t.duration_since(UNIX_EPOCH).expect("after the epoch");
            u64::try_from(d.as_micros()).expect("fits")
        };
        let before = micros(SystemTime::now());
        let ours = SystemClock.now_micros();
        let after = micros(SystemTime::now());
        assert!(
            (before..=after).contains(&ours),
            "{before} <= {ours} <= {after}"
        );
        let secs = SystemClock.now();
        assert!((before / 1_000_000..=after / 1_000_000 + 1).contains(&secs));
    }
}
