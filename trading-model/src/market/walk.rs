//! The market's randomness: a hash of `(seed, stream, which, salt, index)` made uniform or
//! Gaussian, and the Brownian bridge that evaluates a random walk at any second in
//! `BLOCK_LEVELS` steps (see the module doc of [`super`]).

use super::{BLOCK_LEVELS, BLOCKS, ORIGIN_S};

pub(super) const STREAM_ASSET: u64 = 1;
pub(super) const STREAM_BASIS: u64 = 2;
pub(super) const STREAM_BOOK: u64 = 3;
pub(super) const STREAM_TRADES: u64 = 4;

/// The walk (standard units per second) of `(stream, which)` at absolute second `s`.
pub(super) fn walk(seed: u64, stream: u64, which: u64, block_ends: &[f64], s: u64) -> f64 {
    let k = s.saturating_sub(ORIGIN_S);
    let block = usize::try_from(k >> BLOCK_LEVELS).unwrap_or(usize::MAX);
    if block >= BLOCKS {
        return block_ends[BLOCKS];
    }
    let mut lo = block_ends[block];
    let mut hi = block_ends[block + 1];
    let mut start = (block as u64) << BLOCK_LEVELS;
    let offset = k - start;
    if offset == 0 {
        return lo;
    }
    // Halve [start, start + 2^level] until the point is an end: each midpoint is the mean
    // of the ends plus a Gaussian with the bridge's variance (a quarter of the length).
    let mut level = BLOCK_LEVELS;
    while level > 0 {
        let half = 1u64 << (level - 1);
        let mid_value = (lo + hi) / 2.0
            + gaussian(seed, stream, which, u64::from(level), start >> level)
                * (half as f64 / 2.0).sqrt();
        let mid = start + half;
        if k == mid {
            return mid_value;
        }
        if k < mid {
            hi = mid_value;
        } else {
            lo = mid_value;
            start = mid;
        }
        level -= 1;
    }
    lo
}

pub(super) fn mix(mut z: u64) -> u64 {
    // SplitMix64's finaliser: a cheap bijection with good avalanche.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub(super) fn hash(seed: u64, stream: u64, which: u64, salt: u64, index: u64) -> u64 {
    let mut h = mix(seed ^ 0x9e37_79b9_7f4a_7c15);
    for part in [stream, which, salt, index] {
        h = mix(h ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    h
}

/// Uniform in [0, 1).
pub(super) fn uniform(seed: u64, stream: u64, which: u64, salt: u64, index: u64) -> f64 {
    (hash(seed, stream, which, salt, index) >> 11) as f64 / (1u64 << 53) as f64
}

/// Standard normal (Box-Muller).
pub(super) fn gaussian(seed: u64, stream: u64, which: u64, salt: u64, index: u64) -> f64 {
    let h = hash(seed, stream, which, salt, index);
    let u1 = ((h >> 11) as f64 + 1.0) / ((1u64 << 53) as f64 + 1.0);
    let u2 = (mix(h) >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
