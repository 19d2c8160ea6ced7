use proptest::prelude::*;

use super::*;

/// An exact token bucket: the level in microsecond-tokens (a token is `interval`
/// microseconds of refill), capped at the capacity.
struct ExactBucket {
    level_us: u128,
    at_us: u64,
}

impl ExactBucket {
    fn take(&mut self, b: &Bucket, now_us: u64, hits: u64) -> bool {
        let cap = u128::from(b.capacity) * u128::from(b.interval_us);
        self.level_us = (self.level_us + u128::from(now_us - self.at_us)).min(cap);
        self.at_us = now_us;
        let need = u128::from(hits) * u128::from(b.interval_us);
        if need <= self.level_us {
            self.level_us -= need;
            true
        } else {
            false
        }
    }

    fn tokens(&self, b: &Bucket) -> u64 {
        (self.level_us / u128::from(b.interval_us)) as u64
    }
}

proptest! {
    /// GCRA with one stored value decides exactly as a bucket of tokens does, and reports
    /// the same whole tokens left.
    #[test]
    fn gcra_is_an_exact_token_bucket(
        per_window in 1u32..50,
        window_seconds in 1u64..5,
        burst in 1u32..60,
        steps in proptest::collection::vec((0u64..400_000, 0u64..6), 1..200),
    ) {
        let b = Bucket::new(per_window, window_seconds, burst);
        let start = 1_700_000_000_000_000u64;
        let mut exact = ExactBucket { level_us: u128::from(b.capacity) * u128::from(b.interval_us), at_us: start };
        let (mut tat, mut now) = (0u64, start);
        for (gap, hits) in steps {
            now += gap;
            let t = b.take(tat, now, hits);
            let admitted = exact.take(&b, now, hits);
            prop_assert_eq!(t.admitted, admitted, "at {} with {} hits", now - start, hits);
            tat = t.tat_after;
            prop_assert_eq!(b.tokens(tat, now), exact.tokens(&b));
            if !t.admitted {
                // Waiting as told admits the request; a microsecond less does not.
                let wait = b.wait_us(t.tat_before, now, hits);
                if hits <= b.capacity {
                    prop_assert!(b.take(tat, now + wait, hits).admitted);
                    prop_assert!(wait == 0 || !b.take(tat, now + wait - 1, hits).admitted);
                }
            }
        }
    }

    /// The sliding window admits exactly when the rational estimate allows, except within
    /// rounding distance of the boundary.
    #[test]
    fn sliding_window_matches_the_exact_estimate(
        current in 0u64..200,
        previous in 0u64..200,
        window_us in 1u64..10_000_000,
        elapsed_frac in 0u64..1000,
        hits in 0u64..10,
        limit in 0u64..300,
    ) {
        let elapsed = window_us * elapsed_frac / 1000;
        let (admitted, used) = slide(current, previous, elapsed, window_us, hits, limit);
        // (current + hits) × W + previous × (W − e) ≤ limit × W, in integers.
        let w = u128::from(window_us);
        let lhs = u128::from(current + hits) * w + u128::from(previous) * (w - u128::from(elapsed));
        let rhs = u128::from(limit) * w;
        let margin = w / 1_000_000_000 + 1;
        if lhs + margin < rhs || lhs > rhs + margin {
            prop_assert_eq!(admitted, lhs <= rhs);
        }
        prop_assert_eq!(used > limit, !admitted);
    }
}

#[test]
fn a_bucket_refills_one_token_per_interval() {
    // 10 per second, burst 20: 20 pass at once, the 21st waits 100 ms.
    let b = Bucket::new(10, 1, 20);
    assert_eq!(b.interval_us, 100_000);
    let now = 5_000_000;
    let mut tat = 0;
    for _ in 0..20 {
        let t = b.take(tat, now, 1);
        assert!(t.admitted);
        tat = t.tat_after;
    }
    let t = b.take(tat, now, 1);
    assert!(!t.admitted);
    assert_eq!(b.wait_us(t.tat_before, now, 1), 100_000);
    assert!(b.take(tat, now + 100_000, 1).admitted);
    assert_eq!(b.tokens(tat, now + 250_000), 2);
    assert_eq!(b.refill_seconds, 2);
}

#[test]
fn a_zero_rate_bucket_blocks_everything() {
    let b = Bucket::new(0, 1, 5);
    assert!(!b.take(0, 10, 1).admitted);
    assert!(b.take(0, 10, 0).admitted, "a read takes nothing");
}

#[test]
fn sliding_window_weighs_the_previous_window() {
    // 10 per window; 8 in the previous, 0 now: a quarter in, 6 still count.
    let (ok, used) = slide(0, 8, 250_000, 1_000_000, 4, 10);
    assert_eq!((ok, used), (true, 10));
    let (ok, used) = slide(0, 8, 250_000, 1_000_000, 5, 10);
    assert_eq!((ok, used), (false, 11));
    // Half in: 4 of the previous still count.
    assert!(slide(0, 8, 500_000, 1_000_000, 6, 10).0);
}

#[test]
fn names_round_trip() {
    for a in AlgorithmName::ALL {
        assert_eq!(AlgorithmName::parse(a.name()), Some(a));
    }
    assert_eq!(AlgorithmName::parse("leaky_bucket"), None);
    assert_eq!(AlgorithmName::parse("Token_Bucket"), None);
}

#[test]
fn a_bucket_fills_within_the_longest_span() {
    let b = Bucket::new(1, 100 * 365 * 86_400 * 1_000, u32::MAX);
    assert!(b.interval_us * b.capacity <= Bucket::MAX_SPAN_US);
    assert_eq!(b.capacity, u64::from(u32::MAX));
    // A TAT of 2027 plus a full bucket stays exact in a double.
    let tat = 1_800_000_000_000_000 + b.interval_us * b.capacity;
    assert_eq!(tat as f64 as u64, tat);
    assert!(tat < 1 << 53);
}
