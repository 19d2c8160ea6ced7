//! A fixed-bucket latency histogram updated with atomics, so recording costs no lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds in seconds: statsd_exporter's default buckets, which dashboards built on
/// upstream's Prometheus sink expect.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Counts of observations per bucket (the last slot is +Inf), their sum and count.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

/// A copy of a histogram's values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Non-cumulative count per bucket; the last is above the largest bound.
    pub buckets: [u64; BUCKETS.len() + 1],
    /// Sum of observations in seconds.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(d.as_micros() as u64, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// Current values.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut s = HistogramSnapshot::default();
        for (o, b) in s.buckets.iter_mut().zip(&self.buckets) {
            *o = b.load(Relaxed);
        }
        s.sum = self.sum_micros.load(Relaxed) as f64 / 1e6;
        s.count = self.count.load(Relaxed);
        s
    }
}

impl HistogramSnapshot {
    /// What was added since `earlier`.
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let mut d = self.clone();
        for (a, b) in d.buckets.iter_mut().zip(&earlier.buckets) {
            *a = a.saturating_sub(*b);
        }
        d.sum -= earlier.sum;
        d.count = d.count.saturating_sub(earlier.count);
        d
    }

    /// A representative value (ms) for bucket `i`: the middle of its range.
    pub fn bucket_ms(i: usize) -> f64 {
        let hi = BUCKETS
            .get(i)
            .copied()
            .unwrap_or(BUCKETS[BUCKETS.len() - 1] * 2.0);
        let lo = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
        (lo + hi) / 2.0 * 1000.0
    }
}
