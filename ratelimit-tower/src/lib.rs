//! `ratelimit-tower` rate limits the requests of an axum, hyper or tonic service with the
//! rules and counters of the `ratelimit` fleet that sits behind Envoy.
//!
//! It is a shell around [`ratelimit_core::Limiter`]: a [`tower_layer::Layer`] that builds
//! descriptors from each `http::Request` the way Envoy's rate limit actions build them
//! ([`Action`]: a header, the client address, the method, the path, a constant, a header
//! match, or a closure), asks the limiter, and answers `429 Too Many Requests` with
//! `Retry-After` (gRPC callers: `RESOURCE_EXHAUSTED`) when a limit is exceeded. Rules come
//! from the server's YAML files (reloaded when they change, [`reload`]) or from code
//! ([`Rules`], [`RateLimit`]); every algorithm works (fixed and sliding windows, token
//! buckets, lists of limits). On the memory store the limits are the process's own; on
//! Redis (feature `redis`) the keys are the server's, byte for byte, so a request through
//! this layer and a `ShouldRateLimit` call to a `ratelimit` server count against the same
//! counter.
//!
//! ```
//! use std::net::SocketAddr;
//! use std::sync::Arc;
//! use http::{Request, Response, StatusCode};
//! use ratelimit_tower::{Action, HeaderStyle, PeerAddr, RateLimit, RateLimitLayer, Rules};
//! use tower::{Layer, Service, ServiceExt};
//!
//! # futures_executor::block_on(async {
//! // Two a minute per client address.
//! let rules = Rules::new("api").limit(["remote_address"], RateLimit::per_minute(2));
//! let limiter = Arc::new(ratelimit_tower::in_memory(rules).expect("valid rules"));
//! let layer = RateLimitLayer::builder(limiter, "api")
//!     .descriptor([Action::remote_address()])
//!     .headers(HeaderStyle::Ietf)
//!     .build()
//!     .expect("a descriptor");
//! let mut svc = layer.layer(tower::service_fn(|_req: Request<()>| async {
//!     Ok::<_, std::convert::Infallible>(Response::new(String::from("hello")))
//! }));
//! let from = |ip: &str| {
//!     let mut req = Request::new(());
//!     req.extensions_mut().insert(PeerAddr(SocketAddr::new(ip.parse().unwrap(), 4000)));
//!     req
//! };
//! let first = svc.ready().await.unwrap().call(from("10.0.0.1")).await.unwrap();
//! assert_eq!(first.headers()["ratelimit-policy"], "\"default\";q=2;w=60");
//! svc.ready().await.unwrap().call(from("10.0.0.1")).await.unwrap();
//! let third = svc.ready().await.unwrap().call(from("10.0.0.1")).await.unwrap();
//! assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert!(third.headers().contains_key("retry-after"));
//! // Another client has its own two.
//! let other = svc.ready().await.unwrap().call(from("10.0.0.2")).await.unwrap();
//! assert_eq!(other.status(), StatusCode::OK);
//! # });
//! ```
//!
//! The layer's settings can also be read from YAML with Envoy's action names
//! ([`LayerConfig`]). The peer address is read from the request's extensions: ours
//! ([`PeerAddr`]), a bare `SocketAddr`, axum's `ConnectInfo` (feature `axum`) or tonic's
//! `TcpConnectInfo` (feature `tonic`).
//!
//! What it deliberately does not do: decide anything itself (matching, keys and counting
//! are the core's, unchanged), read request bodies, or speak to a `ratelimit` server over
//! gRPC (it shares the server's store instead; put the server behind Envoy for that).
//! Envoy's `source_cluster` and `destination_cluster` actions have no meaning inside one
//! service and are not offered.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod actions;
pub mod client;
pub mod config;
mod decision;
mod error;
pub mod headers;
mod layer;
pub mod matcher;
pub mod reload;
mod service;
mod settings;

pub use actions::{Action, Descriptors, Extractor};
pub use client::{ClientAddress, PeerAddr};
pub use config::LayerConfig;
pub use headers::HeaderStyle;
pub use layer::{LayerBuilder, RateLimitLayer};
pub use matcher::{HeaderMatcher, HeaderSource, RequestInfo, ValueMatch};
pub use service::{RateLimitService, ResponseFuture};
pub use settings::{BuildError, ErrorHook, FailureMode};

pub use ratelimit_backends as backends;
pub use ratelimit_core::code_rules::{Key, RateLimit, Rules};
pub use ratelimit_core::{Entry, Limiter, LimiterSettings};

/// A limiter on the in-process store and the wall clock, with `rules`: the limits of
/// this process alone.
#[cfg(feature = "memory")]
pub fn in_memory(
    rules: Rules,
) -> Result<
    Limiter<ratelimit_backends::MemoryStore, ratelimit_backends::SystemClock>,
    ratelimit_core::ConfigError,
> {
    Limiter::builder(
        ratelimit_backends::MemoryStore::new(),
        ratelimit_backends::SystemClock,
    )
    .rules(rules)
    .build()
}
