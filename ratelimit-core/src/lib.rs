//! `ratelimit-core` is the decision engine of a drop-in replacement for Envoy's global rate
//! limit service, built to be embedded in Rust services as well as served over the wire.
//!
//! It reads upstream's YAML rules, matches request descriptors against them with upstream's
//! exact semantics, builds byte-identical cache keys (so a fleet can share one Redis with
//! the upstream server during a migration), and turns counter values into decisions and
//! statistics with upstream's arithmetic. Beyond upstream, a limit can count as a token
//! bucket (GCRA), a sliding window or a window of several units, and a descriptor can have
//! several limits ([`algorithm`]); rules without those fields behave exactly as upstream's.
//! A store in this process gets no key text at all, but a fingerprint of the key's parts
//! ([`key_id`]).
//!
//! What it deliberately does not do: any I/O. It opens no sockets or files, spawns no tasks,
//! reads no clock and pulls in no async runtime. Counters live behind [`CounterStore`] and
//! time behind [`Clock`]; both are supplied by the caller (see `ratelimit-backends`).
//!
//! The entry point is [`Limiter`]: build it from YAML (or from rules written in code,
//! [`code_rules`]), call
//! [`Limiter::should_rate_limit`] (or, on a store that counts in process,
//! [`Limiter::should_rate_limit_now`] without an executor), swap rules with
//! [`Limiter::set_rules`] at any time. Every entry point takes one decision path: the plan
//! step ([`Limiter::plan`]: match descriptors, apply `replaces`, build keys and hits), the
//! count step (one store round trip; a store says what it is with [`StoreKind`]), and the
//! finish step ([`Limiter::finish`], around the pure arithmetic of [`decide::decide`]). The
//! plan and finish steps ask no store, so tests and embedders can run them on counts of
//! their own.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod algorithm;
pub mod clock;
pub mod code_rules;
pub mod config;
pub mod decide;
pub mod json;
pub mod key_id;
pub mod limiter;
pub mod local_cache;
pub mod prescan;
pub mod quota;
pub mod rules;
pub mod stats;
pub mod store;
pub mod types;
pub mod unit;

pub use algorithm::{Algorithm, AlgorithmName};
pub use clock::{Clock, ManualClock, Now};
pub use config::{ConfigError, ConfigErrorKind, Document, parse_document, parse_document_with};
pub use key_id::KeyId;
pub use limiter::{
    Error, HeaderNames, Limiter, LimiterBuilder, LimiterSettings, release_thread_state,
};
pub use prescan::Limits;
pub use rules::RuleSet;
pub use stats::Stats;
pub use store::{CounterStore, Increment, MAX_HITS, Op, StoreError, StoreKind};
pub use types::{
    Code, CurrentLimit, Descriptor, DescriptorStatus, Entry, Header, LimitOverride, Request,
    Response, Statuses, StatusesIntoIter,
};
pub use unit::Unit;
