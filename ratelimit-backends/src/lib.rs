//! Counter stores for `ratelimit-core`, and the real clock.
//!
//! Each store implements [`ratelimit_core::CounterStore`]: it adds hits to keys atomically
//! and expires them, nothing more. Which keys to count, and what the counts mean, is
//! decided in the core. The in-process [`MemoryStore`] (feature `memory`, on by default) is
//! for single-instance servers, embedding and tests; shared stores come behind features.
//!
//! What this crate deliberately does not do: match rules, build keys, or choose a store from
//! settings (the server shell does that).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod clock;
#[cfg(feature = "memory")]
mod memory;

pub use clock::SystemClock;

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

#[cfg(feature = "memcached")]
pub use memcached::MemcachedStore;
