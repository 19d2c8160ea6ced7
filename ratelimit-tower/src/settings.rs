//! What a layer is set up with, shared by the services it makes: a leaf, so that the
//! layer, its service and the decision path all read it without depending on each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::StatusCode;
use ratelimit_core::{Error, Limiter};
use serde::Deserialize;

use crate::actions::Descriptors;
use crate::client::ClientAddress;
use crate::headers::HeaderStyle;

pub use crate::error::BuildError;

/// What happens to a request the limiter could not decide (the store is down, no rules
/// are loaded). Either way the error goes to the layer's error hook.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// Let it through (Envoy's default, `failure_mode_deny: false`).
    #[default]
    Open,
    /// Refuse it with the error status (`500`, or gRPC `UNAVAILABLE`).
    Closed,
}

/// Called with every error the limiter returns (a store failure, no rules loaded).
pub type ErrorHook = Arc<dyn Fn(&Error) + Send + Sync>;

/// What every service of a layer shares.
pub(crate) struct Shared<S, C> {
    /// Unique per layer built in this process (from 1), never reused, unlike an address.
    pub(crate) id: u64,
    pub(crate) limiter: Arc<Limiter<S, C>>,
    pub(crate) domain: String,
    pub(crate) descriptors: Descriptors,
    pub(crate) client: ClientAddress,
    pub(crate) headers: HeaderStyle,
    pub(crate) shadow_mode: bool,
    pub(crate) failure_mode: FailureMode,
    pub(crate) status_on_error: StatusCode,
    pub(crate) on_error: Option<ErrorHook>,
}

/// A new [`Shared::id`].
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
