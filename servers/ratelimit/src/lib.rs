//! The `ratelimit` server: a thin shell that serves `ratelimit-core` over upstream's
//! interfaces (gRPC `ShouldRateLimit` and health, HTTP `/json` and `/healthcheck`, the
//! debug port) with upstream's settings.
//!
//! It parses settings, reads rule files (or takes them from xDS), picks a counter store and
//! wires them to sockets. What it deliberately does not do: decide anything. Matching, keys,
//! counting and statistics all live in `ratelimit-core`, stores in `ratelimit-backends`; a
//! request handler here only translates.
//!
//! [`server::run`] turns [`Settings`] into the running server, exactly as the `ratelimit`
//! binary runs it; [`server::serve`] runs the listeners alone until a shutdown future
//! resolves.
// `unsafe` only where a module allows it and says why each use is sound: the CPU
// profiler's signal handler (`cpu_profile::sampler`) and one allocator call (`memory`).
#![deny(unsafe_code)]

pub mod app;
pub mod bounded_file;
pub mod checkconfig;
pub mod conn;
pub mod convert;
pub mod cpu_profile;
pub mod files;
pub mod grpc;
pub mod health;
pub mod http;
pub mod limits;
pub mod log;
pub mod memory;
pub mod metrics;
pub mod pb;
pub mod provider;
pub mod rls_call;
pub mod rls_encode;
pub mod server;
pub mod settings;
pub mod tls;
pub mod tracing;

pub use app::{App, ServerLimiter};
pub use health::Health;
pub use server::{DRAIN, Listeners, serve};
pub use settings::Settings;
