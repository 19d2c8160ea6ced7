//! A fixed-bucket latency histogram updated with atomics, so recording costs no lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use ratelimit_backends::SystemClock;

/// Upper bounds in seconds: statsd_exporter's default buckets, which dashboards built on
/// upstream's Prometheus sink expect.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// [`BUCKETS`] in nanoseconds, what an observation is compared with.
const BOUNDS_NS: [u64; BUCKETS.len()] = {
    let mut b = [0; BUCKETS.len()];
    let mut i = 0;
    while i < b.len() {
        b[i] = (BUCKETS[i] * 1e9) as u64;
        i += 1;
    }
    b
};

/// A reading to time an operation from, for [`Histogram::observe_since`].
pub fn start() -> u64 {
    SystemClock.monotonic_nanos()
}

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
    /// Records the time since `started`, a [`start`] reading.
    pub fn observe_since(&self, started: u64) {
        self.observe_nanos(start().saturating_sub(started));
    }

    /// Records one observation of `ns` nanoseconds.
    pub fn observe_nanos(&self, ns: u64) {
        let i = BOUNDS_NS
            .iter()
            .position(|b| ns <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(ns / 1_000, Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_lands_in_the_first_bucket_whose_bound_it_does_not_pass() {
        assert_eq!(
            BOUNDS_NS,
            [
                5_000_000,
                10_000_000,
                25_000_000,
                50_000_000,
                100_000_000,
                250_000_000,
                500_000_000,
                1_000_000_000,
                2_500_000_000,
                5_000_000_000,
                10_000_000_000
            ]
        );
        let h = Histogram::default();
        for ns in [0, 5_000_000, 5_000_001, 10_000_000_001] {
            h.observe_nanos(ns);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets[0], 2);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[BUCKETS.len()], 1);
        assert_eq!(s.count, 4);
        assert!((s.sum - 10.010_000_001).abs() < 1e-6, "{}", s.sum);
    }

    #[test]
    fn observe_since_times_from_a_start_reading() {
        let h = Histogram::default();
        let started = start();
        std::thread::sleep(std::time::Duration::from_millis(6));
        h.observe_since(started);
        let s = h.snapshot();
        assert_eq!(s.buckets[0], 0, "6 ms is past the first bound");
        assert_eq!(s.count, 1);
        assert!((0.006..1.0).contains(&s.sum), "{}", s.sum);
    }
}
