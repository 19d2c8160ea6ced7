//! The counter store `BACKEND_TYPE` names, connected, timed when it is remote, and wrapped
//! in spans when tracing is on.

use std::sync::Arc;

use async_trait::async_trait;
use opentelemetry_sdk::trace::SdkTracerProvider;
use ratelimit_backends::memcached::Severity;
use ratelimit_backends::{MemcachedStore, MemoryStore, RedisStore};
use ratelimit_core::{CounterStore, Increment, StoreError};

use crate::log::{self, Level};
use crate::metrics::Metrics;
use crate::metrics::histogram::{self, Histogram};
use crate::settings::{BackendType, Settings};

/// The store, and the Redis store again when it is one (its pools feed gauges).
pub(super) async fn connect(
    settings: &Settings,
) -> Result<(Arc<dyn CounterStore>, Option<Arc<RedisStore>>), String> {
    Ok(match settings.backend_type {
        BackendType::Memory => (Arc::new(MemoryStore::new()), None),
        BackendType::Redis => {
            let retry = |m: &str| log::log(Level::Warn, m);
            let r = Arc::new(
                RedisStore::connect(
                    settings.redis.clone(),
                    settings.redis_per_second.clone(),
                    settings.redis_startup,
                    &retry,
                )
                .await
                .map_err(|e| format!("cannot connect to redis: {e}"))?
                .with_warnings(|m| log::log(Level::Warn, m)),
            );
            (r.clone(), Some(r))
        }
        BackendType::Memcache => {
            let report = |severity: Severity, m: &str| {
                let level = match severity {
                    Severity::Info => Level::Info,
                    Severity::Error => Level::Error,
                };
                log::log(level, m);
            };
            let m = MemcachedStore::connect(settings.memcache.clone(), report)
                .await
                .map_err(|e| e.to_string())?;
            (Arc::new(m), None)
        }
    })
}

/// Starts the trace exporter when tracing is on, and wraps the store in spans then only:
/// the wrapper costs a span per call.
pub(super) fn traced(
    settings: &Settings,
    store: Arc<dyn CounterStore>,
) -> Result<(Arc<dyn CounterStore>, Option<SdkTracerProvider>), String> {
    if !settings.tracing.enabled {
        return Ok((store, None));
    }
    let provider = crate::tracing::init(&settings.tracing)?;
    Ok((Arc::new(crate::tracing::TracedStore(store)), Some(provider)))
}

/// Times every call to a remote store into `metrics.store_time`; the memory store, which
/// answers in the decision's own time, is left as it is.
pub(super) fn timed(
    settings: &Settings,
    store: Arc<dyn CounterStore>,
    metrics: &mut Metrics,
) -> Arc<dyn CounterStore> {
    if settings.backend_type == BackendType::Memory {
        return store;
    }
    let histogram = Arc::new(Histogram::default());
    metrics.store_time = Some(histogram.clone());
    Arc::new(TimedStore { store, histogram })
}

/// A store whose calls are timed, errors included.
struct TimedStore {
    store: Arc<dyn CounterStore>,
    histogram: Arc<Histogram>,
}

#[async_trait]
impl CounterStore for TimedStore {
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        let started = histogram::start();
        let r = self.store.increment(now, batch, counts).await;
        self.histogram.observe_since(started);
        r
    }

    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        let started = histogram::start();
        let r = self.store.get(now, batch, out).await;
        self.histogram.observe_since(started);
        r
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        let started = histogram::start();
        let r = self.store.refund(now, batch).await;
        self.histogram.observe_since(started);
        r
    }

    fn healthy(&self) -> bool {
        self.store.healthy()
    }
}
