//! How a limit counts: upstream's fixed window, a sliding window, or a token bucket, with
//! the arithmetic each store runs inside its atomic step. Stores call these functions (the
//! memory store) or mirror them operation for operation (the Redis scripts), so that the
//! store's choice to take hits and the limiter's reading of its answer always agree.
//!
//! Times are Unix microseconds: a token bucket refills continuously, and a sliding window
//! weighs the previous window by how far into the current one a request comes.

/// What the rule file says a limit's algorithm is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AlgorithmName {
    /// Upstream's: a counter per window; every hit counts, also over the limit.
    #[default]
    FixedWindow,
    /// The current window's count plus the previous one's, weighted by how much of it
    /// still overlaps the last window length; denied hits are not counted.
    SlidingWindow,
    /// A bucket of `burst` tokens refilled at `requests_per_unit` per window (GCRA);
    /// a denied request takes no tokens.
    TokenBucket,
}

impl AlgorithmName {
    /// Every algorithm, in the order the docs list them.
    pub const ALL: [AlgorithmName; 3] = [
        AlgorithmName::FixedWindow,
        AlgorithmName::SlidingWindow,
        AlgorithmName::TokenBucket,
    ];

    /// The name in rule files.
    pub const fn name(self) -> &'static str {
        match self {
            AlgorithmName::FixedWindow => "fixed_window",
            AlgorithmName::SlidingWindow => "sliding_window",
            AlgorithmName::TokenBucket => "token_bucket",
        }
    }

    /// Parses a name as written in a rule file (exact, lower case).
    pub fn parse(name: &str) -> Option<AlgorithmName> {
        AlgorithmName::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// A limit's algorithm with the numbers its arithmetic needs, computed once at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Windows of `seconds`, aligned to multiples of it since the epoch.
    FixedWindow {
        /// The window length: the unit times `unit_multiplier`.
        seconds: u64,
    },
    /// Windows aligned as fixed ones; see [`slide`].
    SlidingWindow {
        /// The window length: the unit times `unit_multiplier`.
        seconds: u64,
    },
    /// GCRA; see [`Bucket`].
    TokenBucket(Bucket),
}

impl Algorithm {
    /// Which algorithm this is.
    pub const fn name(self) -> AlgorithmName {
        match self {
            Algorithm::FixedWindow { .. } => AlgorithmName::FixedWindow,
            Algorithm::SlidingWindow { .. } => AlgorithmName::SlidingWindow,
            Algorithm::TokenBucket(_) => AlgorithmName::TokenBucket,
        }
    }

    /// A fixed window's length in seconds, 0 for the other algorithms.
    pub const fn fixed_window_seconds(self) -> u64 {
        match self {
            Algorithm::FixedWindow { seconds } => seconds,
            _ => 0,
        }
    }

    /// The window length in seconds (for a bucket, the time a full refill takes).
    pub const fn window_seconds(self) -> u64 {
        match self {
            Algorithm::FixedWindow { seconds } | Algorithm::SlidingWindow { seconds } => seconds,
            Algorithm::TokenBucket(b) => b.refill_seconds,
        }
    }
}

/// The start of the window of `seconds` that holds `now` (seconds).
#[inline]
pub const fn window_start(now: u64, seconds: u64) -> u64 {
    now - now % seconds
}

/// Seconds from `now` until the window of `seconds` holding it ends.
#[inline]
pub const fn until_window_end(now: u64, seconds: u64) -> u64 {
    seconds - now % seconds
}

/// The sliding window's step: whether `hits` more fit, given the current window's count,
/// the previous window's, and how far into the current window `now_us` is.
///
/// The estimate is `current + previous × (1 − elapsed / window)`; `hits` fit when
/// `estimate + hits ≤ limit`. Computed in `f64` with exactly these operations in this
/// order, which the Redis script repeats (Lua numbers are doubles), so both decide alike.
/// Returns the admission and the `used` value a store answers: the estimate rounded up
/// plus `hits`, kept at or below `limit` when admitted and above it when not, so that
/// [`crate::decide::decide`] reads the decision back as a fixed window's count.
#[inline]
pub fn slide(
    current: u64,
    previous: u64,
    elapsed_us: u64,
    window_us: u64,
    hits: u64,
    limit: u64,
) -> (bool, u64) {
    let weight = (window_us.saturating_sub(elapsed_us)) as f64 / window_us as f64;
    let estimate = current as f64 + previous as f64 * weight;
    let admitted = estimate + hits as f64 <= limit as f64;
    let used = (estimate.ceil() as u64).saturating_add(hits);
    let used = if admitted {
        used.min(limit)
    } else {
        used.max(limit.saturating_add(1))
    };
    (admitted, used)
}

/// A token bucket as GCRA keeps it: one stored value, the theoretical arrival time (TAT),
/// the instant at which the bucket will be full again. A request of `h` hits is admitted
/// when `max(TAT, now) + h × interval − now ≤ capacity × interval`, and then moves the TAT
/// by `h × interval`; a denied one leaves it. This is exactly a bucket of `capacity`
/// tokens gaining one every `interval` microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Microseconds per token: the window divided by `requests_per_unit`, rounded up
    /// (never more generous than the rule).
    pub interval_us: u64,
    /// Most tokens the bucket holds (`burst`).
    pub capacity: u64,
    /// Seconds for an empty bucket to fill (for expiry of its key), at least 1.
    pub refill_seconds: u64,
}

/// What [`Bucket::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The hits fit and were taken.
    pub admitted: bool,
    /// The TAT before the request, never before `now`: what a store answers.
    pub tat_before: u64,
    /// The TAT to store: moved when admitted, as it was otherwise.
    pub tat_after: u64,
}

impl Bucket {
    /// The longest time a bucket takes to fill, in microseconds: 2^52.
    pub const MAX_SPAN_US: u64 = 1 << 52;

    /// A bucket of `capacity` refilled with `per_window` tokens every `window_seconds`.
    /// `per_window` 0 blocks every request, as a window limit of 0 does: the bucket then
    /// holds nothing.
    ///
    /// A full refill takes at most [`Bucket::MAX_SPAN_US`] (about 142 years): a rule asking
    /// for a slower one refills that fast. Every TAT of such a bucket then stays below
    /// 2^53 µs, exact in the doubles of a Redis script.
    pub fn new(per_window: u32, window_seconds: u64, capacity: u32) -> Bucket {
        let window_us = window_seconds.saturating_mul(1_000_000).max(1);
        let capacity = if per_window == 0 {
            0
        } else {
            u64::from(capacity)
        };
        let interval_us = window_us
            .div_ceil(u64::from(per_window.max(1)))
            .min(Bucket::MAX_SPAN_US / capacity.max(1))
            .max(1);
        Bucket {
            interval_us,
            capacity,
            refill_seconds: interval_us
                .saturating_mul(capacity)
                .div_ceil(1_000_000)
                .clamp(1, 10 * 365 * 86_400),
        }
    }

    /// The GCRA step for a request of `hits` at `now_us`, given the stored TAT (0 for a
    /// new key).
    #[inline]
    pub fn take(&self, stored_tat: u64, now_us: u64, hits: u64) -> Take {
        let tat_before = stored_tat.max(now_us);
        let admitted = hits <= self.capacity
            && tat_before.saturating_add(hits.saturating_mul(self.interval_us)) - now_us
                <= self.capacity.saturating_mul(self.interval_us);
        let tat_after = if admitted {
            tat_before.saturating_add(hits.saturating_mul(self.interval_us))
        } else {
            tat_before
        };
        Take {
            admitted,
            tat_before,
            tat_after,
        }
    }

    /// Whole tokens in the bucket when its TAT is `tat` (at or after `now_us`).
    #[inline]
    pub fn tokens(&self, tat: u64, now_us: u64) -> u64 {
        let used_us = tat.saturating_sub(now_us);
        self.capacity
            .saturating_mul(self.interval_us)
            .saturating_sub(used_us)
            / self.interval_us
    }

    /// Microseconds until `hits` would be admitted, given the TAT before the request.
    #[inline]
    pub fn wait_us(&self, tat_before: u64, now_us: u64, hits: u64) -> u64 {
        let needed = tat_before.saturating_add(hits.saturating_mul(self.interval_us));
        needed
            .saturating_sub(now_us)
            .saturating_sub(self.capacity.saturating_mul(self.interval_us))
    }
}

#[cfg(test)]
mod tests;
