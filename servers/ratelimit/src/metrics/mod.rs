//! The server's statistics: everything `ratelimit-core` counts plus the server's own
//! timings and gauges, under upstream's names, pushed to statsd or DogStatsD, pulled by
//! Prometheus, printed to the log, or dropped.
//!
//! Recording is atomic adds on the request path; names are formatted only when a sink
//! flushes or is scraped.

pub mod histogram;
pub mod prometheus;
pub mod statsd;

use std::sync::{Arc, Mutex};

use ratelimit_core::Stats;
use ratelimit_core::stats::FlushMark;

use histogram::{Histogram, HistogramSnapshot};

/// The statsd-style name of the decision call's timer.
pub const RESPONSE_TIME: &str = "ratelimit_server.ShouldRateLimit.response_time";
/// The name of the remote store's round-trip histogram.
pub const STORE_TIME: &str = "ratelimit.store.response_time";

/// One statistic's current value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Monotonic total.
    Counter(u64),
    /// Level.
    Gauge(u64),
    /// Latency distribution.
    Timer(HistogramSnapshot),
}

type GaugeFn = Box<dyn Fn(&mut Vec<(String, u64)>) + Send + Sync>;

/// Every statistic of the server.
pub struct Metrics {
    /// The limiter's counters.
    pub stats: Arc<Stats>,
    /// `ratelimit_server.ShouldRateLimit.response_time`.
    pub response_time: Histogram,
    /// `ratelimit.store.response_time`: each call to a remote store (Redis, memcached),
    /// errors included; absent on the memory store.
    pub store_time: Option<Arc<Histogram>>,
    gauges: Mutex<Vec<GaugeFn>>,
}

impl Metrics {
    /// Statistics over the limiter's registry.
    pub fn new(stats: Arc<Stats>) -> Self {
        Metrics {
            stats,
            response_time: Histogram::default(),
            store_time: None,
            gauges: Mutex::default(),
        }
    }

    /// Adds gauges read at collection time (pool connections, local cache entries...).
    pub fn add_gauges(&self, f: impl Fn(&mut Vec<(String, u64)>) + Send + Sync + 'static) {
        self.gauges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// Every statistic with its statsd-style name, sorted by name.
    pub fn collect(&self) -> Vec<(String, Value)> {
        self.collect_for_flush().0
    }

    /// [`Metrics::collect`], and what to release once the values are sent
    /// ([`Stats::release_flushed`]).
    pub fn collect_for_flush(&self) -> (Vec<(String, Value)>, FlushMark) {
        let (snapshot, mark) = self.stats.snapshot_for_flush();
        let mut out: Vec<(String, Value)> = snapshot
            .into_iter()
            .map(|(k, v)| (k, Value::Counter(v)))
            .collect();
        let mut g = Vec::new();
        for f in self.gauges.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            f(&mut g);
        }
        out.extend(g.into_iter().map(|(k, v)| (k, Value::Gauge(v))));
        out.push((
            RESPONSE_TIME.to_owned(),
            Value::Timer(self.response_time.snapshot()),
        ));
        if let Some(h) = &self.store_time {
            out.push((STORE_TIME.to_owned(), Value::Timer(h.snapshot())));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        (out, mark)
    }
}

/// Parses upstream's `k1:v1,k2:v2` tag lists (`EXTRA_TAGS`).
pub fn parse_tags(s: &str) -> Result<Vec<(String, String)>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.split_once(':')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("tag {t:?} is not key:value"))
        })
        .collect()
}
