//! The arithmetic of one decision: from a store's answer to a status and stat deltas.
//! For fixed windows exactly as upstream computes them (including its float32 near-limit
//! threshold); sliding windows and token buckets read their answer back into the same
//! arithmetic (see [`crate::algorithm`]).

use crate::algorithm::{Algorithm, Bucket};
use crate::clock::Now;
use crate::stats::StatDelta;
use crate::types::{Code, CurrentLimit, DescriptorStatus};
use crate::unit::Unit;

/// The limit being decided, independent of where it came from (rule or override).
#[derive(Debug, Clone, Copy)]
pub struct LimitSpec<'a> {
    /// Allowed hits per window.
    pub requests_per_unit: u32,
    /// The window.
    pub unit: Unit,
    /// The rule's name, "" for none.
    pub name: &'a str,
    /// Report OK even when over the limit.
    pub shadow_mode: bool,
    /// How the limit counts.
    pub algorithm: Algorithm,
}

/// The near-limit threshold: `floor(float32(limit) * ratio)`, computed in 32-bit floats as
/// upstream does so that boundary cases agree, and held in 32 bits as upstream holds it
/// (a ratio above 1 can put it past `u32::MAX`; it then saturates there).
#[inline]
pub fn near_limit_threshold(requests_per_unit: u32, ratio: f32) -> u64 {
    let near = requests_per_unit as f32 * ratio;
    // The cast truncates, which is the floor for the positive values that reach it, and
    // saturates NaN to 0 and large values to `u32::MAX`: no call into libm, and a shorter
    // conversion than to 64 bits. Saturating changes no decision: the threshold is only
    // compared with counts within the limit or clamped to the limit, both <= u32::MAX.
    u64::from(near as u32)
}

/// Decides one limit given the store's `answer` for this request's `hits` (for a fixed
/// window, the counter after the hits were added; see [`crate::store::Op`]).
/// `from_local_cache` means the key was known to be over the limit and the store was skipped.
#[inline(always)] // its two results are built in the caller's frame instead of copied out
pub fn decide(
    limit: &LimitSpec<'_>,
    answer: u64,
    hits: u64,
    near_ratio: f32,
    now: Now,
    from_local_cache: bool,
) -> (DescriptorStatus, StatDelta) {
    let r = Reading::of(limit, answer, hits, now, from_local_cache);
    decide_reading(limit, r, hits, near_ratio, from_local_cache)
}

/// A store's answer for one limit, as the window arithmetic of [`decide_reading`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Hits the limit allows at once: `requests_per_unit`, or a bucket's capacity.
    pub capacity: u32,
    /// The count with this request's hits; over `capacity` when the request is denied.
    pub after: u64,
    /// What `duration_until_reset` says, in seconds.
    pub until_reset: u64,
    /// `limit_remaining` when denied: 0 for windows, the tokens still in a bucket.
    pub left_when_over: u32,
}

impl Reading {
    /// The reading of `answer` for `limit`'s algorithm.
    #[inline(always)]
    pub fn of(limit: &LimitSpec<'_>, answer: u64, hits: u64, now: Now, cached: bool) -> Reading {
        match limit.algorithm {
            Algorithm::FixedWindow { seconds } | Algorithm::SlidingWindow { seconds } => {
                Reading::window(limit, seconds, answer, now)
            }
            Algorithm::TokenBucket(b) => Reading::bucket(&b, answer, hits, now, cached),
        }
    }

    /// A fixed or sliding window of `seconds`: `count` is the count with this request.
    #[inline(always)]
    pub fn window(limit: &LimitSpec<'_>, seconds: u64, count: u64, now: Now) -> Reading {
        Reading {
            capacity: limit.requests_per_unit,
            after: count,
            until_reset: crate::algorithm::until_window_end(now.secs, seconds),
            left_when_over: 0,
        }
    }

    /// A token bucket's answer (the TAT before the request): the tokens used after the
    /// request, over the capacity when denied; until reset: when denied, the wait until
    /// the request would pass; when admitted, until the bucket is full again.
    #[inline(always)] // the reading stays in registers
    pub fn bucket(b: &Bucket, tat_before: u64, hits: u64, now: Now, cached: bool) -> Reading {
        let capacity = u32::try_from(b.capacity).unwrap_or(u32::MAX);
        let secs = |us: u64| us.div_ceil(1_000_000);
        if cached {
            return Reading {
                capacity,
                after: b.capacity + hits,
                until_reset: secs(b.interval_us),
                left_when_over: 0,
            };
        }
        let t = b.take(tat_before, now.micros, hits);
        if t.admitted {
            Reading {
                capacity,
                after: b.capacity - b.tokens(t.tat_after, now.micros),
                until_reset: secs(t.tat_after - now.micros),
                left_when_over: 0,
            }
        } else {
            let left = b.tokens(t.tat_before, now.micros);
            Reading {
                capacity,
                after: (b.capacity - left).saturating_add(hits).max(b.capacity + 1),
                until_reset: secs(b.wait_us(t.tat_before, now.micros, hits)).max(1),
                left_when_over: u32::try_from(left).unwrap_or(u32::MAX),
            }
        }
    }
}

/// The window arithmetic on a [`Reading`]: `after` against `capacity`, upstream's for a
/// fixed window.
#[inline(always)] // its two results are built in the caller's frame instead of copied out
pub fn decide_reading(
    limit: &LimitSpec<'_>,
    r: Reading,
    hits: u64,
    near_ratio: f32,
    from_local_cache: bool,
) -> (DescriptorStatus, StatDelta) {
    let Reading {
        capacity,
        after,
        until_reset,
        left_when_over,
    } = r;
    let mut delta = StatDelta {
        total_hits: hits,
        ..StatDelta::default()
    };
    let rpu = u64::from(capacity);
    let mut status = DescriptorStatus {
        code: Code::Ok,
        current_limit: Some(CurrentLimit {
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
            // Most rules have no name: skip the allocator's bookkeeping for those.
            name: if limit.name.is_empty() {
                String::new()
            } else {
                limit.name.to_owned()
            },
            capacity,
            window_seconds: limit.algorithm.window_seconds(),
        }),
        limit_remaining: 0,
        duration_until_reset: Some(until_reset),
    };
    let before = after.saturating_sub(hits);
    if from_local_cache {
        status.code = Code::OverLimit;
        delta.over_limit = hits;
        delta.over_limit_with_local_cache = hits;
    } else if after > rpu {
        status.code = Code::OverLimit;
        status.limit_remaining = left_when_over;
        if before >= rpu {
            delta.over_limit = hits;
        } else {
            let near = near_limit_threshold(capacity, near_ratio);
            delta.over_limit = after - rpu;
            delta.near_limit = rpu - near.max(before).min(rpu);
        }
    } else {
        status.limit_remaining = u32::try_from(rpu - after).unwrap_or(u32::MAX);
        delta.within_limit = hits;
        let near = near_limit_threshold(capacity, near_ratio);
        if after > near {
            delta.near_limit = if before >= near { hits } else { after - near };
        }
    }
    if limit.shadow_mode && status.code == Code::OverLimit {
        status.code = Code::Ok;
        delta.shadow_mode = if from_local_cache || before >= rpu {
            hits
        } else {
            after - rpu
        };
    }
    (status, delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rpu: u32) -> LimitSpec<'static> {
        LimitSpec {
            requests_per_unit: rpu,
            unit: Unit::Minute,
            name: "",
            shadow_mode: false,
            algorithm: Algorithm::FixedWindow { seconds: 60 },
        }
    }

    fn run(rpu: u32, after: u64, hits: u64) -> (DescriptorStatus, StatDelta) {
        decide(&spec(rpu), after, hits, 0.8, Now::from_secs(2222), false)
    }

    // The worked examples of upstream's limiter tests (limit 20 => near 16; 15 => 12).
    #[test]
    fn near_and_over_examples() {
        let (s, d) = run(20, 19, 3);
        assert_eq!(
            (s.code, s.limit_remaining, d.near_limit, d.over_limit),
            (Code::Ok, 1, 3, 0)
        );
        let (s, d) = run(20, 22, 3);
        assert_eq!(
            (s.code, d.over_limit, d.near_limit),
            (Code::OverLimit, 2, 1)
        );
        let (_, d) = run(20, 22, 7);
        assert_eq!((d.over_limit, d.near_limit), (2, 4));
        let (_, d) = run(10, 30, 3);
        assert_eq!((d.over_limit, d.near_limit), (3, 0));
        let (s, d) = run(15, 11, 1);
        assert_eq!((s.limit_remaining, d.near_limit), (4, 0));
        let (s, d) = run(15, 13, 1);
        assert_eq!((s.limit_remaining, d.near_limit), (2, 1));
        let (s, d) = run(15, 16, 1);
        assert_eq!(
            (s.code, d.over_limit, d.near_limit),
            (Code::OverLimit, 1, 0)
        );
        assert_eq!(s.duration_until_reset, Some(58));
    }

    #[test]
    fn zero_limit_blocks_and_peek_reports_over() {
        let (s, d) = run(0, 1, 1);
        assert_eq!((s.code, d.over_limit), (Code::OverLimit, 1));
        let (s, d) = run(5, 6, 0);
        assert_eq!(
            (s.code, d.over_limit, d.total_hits),
            (Code::OverLimit, 0, 0)
        );
    }

    #[test]
    fn shadow_mode_reports_ok_and_counts() {
        let mut l = spec(2);
        l.shadow_mode = true;
        let (s, d) = decide(&l, 3, 1, 0.8, Now::from_secs(0), false);
        assert_eq!(
            (s.code, s.limit_remaining, d.shadow_mode, d.over_limit),
            (Code::Ok, 0, 1, 1)
        );
        let (s, d) = decide(&l, 9, 1, 0.8, Now::from_secs(0), true);
        assert_eq!(
            (s.code, d.shadow_mode, d.over_limit_with_local_cache),
            (Code::Ok, 1, 1)
        );
    }

    #[test]
    fn near_threshold_truncation_is_upstreams_floor() {
        let floor = |rpu: u32, ratio: f32| {
            let near = (rpu as f32 * ratio).floor();
            if near <= 0.0 {
                0
            } else {
                (near as u64).min(u64::from(u32::MAX))
            }
        };
        let ratios = [
            0.0,
            0.1,
            0.5,
            0.8,
            0.8000001,
            0.99,
            1.0,
            1.5,
            -0.5,
            f32::NAN,
            f32::INFINITY,
        ];
        let limits = (0..2000).chain([16_777_215, 16_777_217, 1 << 30, u32::MAX]);
        for rpu in limits {
            for ratio in ratios {
                assert_eq!(
                    near_limit_threshold(rpu, ratio),
                    floor(rpu, ratio),
                    "{rpu} * {ratio}"
                );
            }
        }
    }

    /// A threshold saturated at `u32::MAX` decides as the unsaturated one would: with a
    /// ratio above 1 nothing within the limit is near it, and crossing the limit counts no
    /// near-limit hits.
    #[test]
    fn a_saturated_threshold_decides_as_the_exact_one() {
        for ratio in [1.5, 2.0, f32::INFINITY] {
            for (after, hits) in [
                (1, 1),
                (u64::from(u32::MAX), 5),
                (u64::from(u32::MAX) + 3, 5),
            ] {
                let (_, d) = decide(
                    &spec(u32::MAX),
                    after,
                    hits,
                    ratio,
                    Now::from_secs(2222),
                    false,
                );
                assert_eq!(d.near_limit, 0, "after {after}, ratio {ratio}");
            }
        }
    }
}
