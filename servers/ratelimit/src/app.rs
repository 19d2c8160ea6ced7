//! What every request handler shares: the limiter, health, the settings and statistics.
//! Built once by [`crate::server::run`]; the faces (gRPC, HTTP) and the rule providers
//! only read it (rule loads swap the limiter's rules atomically).

use std::sync::Arc;

use ratelimit_backends::RedisStore;
use ratelimit_core::{Clock, CounterStore, Limiter};

use crate::health::Health;
use crate::metrics::Metrics;
use crate::settings::Settings;

/// The limiter as the server runs it: any store, any clock.
pub type ServerLimiter = Limiter<Arc<dyn CounterStore>, Arc<dyn Clock>>;

/// Everything a request handler needs.
pub struct App {
    /// The decision engine.
    pub limiter: ServerLimiter,
    /// Health components.
    pub health: Health,
    /// The settings the server started with.
    pub settings: Settings,
    /// Statistics for the sinks and the debug port.
    pub metrics: Arc<Metrics>,
    /// The Redis through which RLQS replicas share budgets (a Redis store, with
    /// `RLQS_SHARE_THROUGH_REDIS`).
    pub quota_redis: Option<Arc<RedisStore>>,
}
