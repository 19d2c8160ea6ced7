//! The arithmetic of sharing one bucket's budget, in integers so that the bounds hold
//! exactly: shares are counted in thousandths of a request per rule window.

use super::TokenBucket;

/// Shares and demands count thousandths of a request per rule window.
pub const SCALE: u64 = 1000;

/// Splits `budget` between streams with the given `demands` (same units):
///
/// 1. each stream gets a floor, `budget * floor_permille / 1000 / streams`;
/// 2. the rest is filled max-min fair on demand above the floor: the smallest demands
///    are met in full, and the streams left share what remains evenly;
/// 3. what is left when every demand is met is split evenly, so that any stream can grow.
///
/// The shares add up to exactly `budget` (none when there are no streams).
pub fn fair_shares(budget: u64, demands: &[u64], floor_permille: u64) -> Vec<u64> {
    let n = demands.len() as u64;
    if n == 0 {
        return Vec::new();
    }
    let floor = (u128::from(budget) * u128::from(floor_permille.min(1000)) / 1000) as u64 / n;
    let mut shares = vec![floor; demands.len()];
    let mut left = budget - floor * n;
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&i| (demands[i].saturating_sub(floor), i));
    let mut waiting = n;
    for &i in &order {
        let give = demands[i].saturating_sub(floor).min(left / waiting);
        shares[i] += give;
        left -= give;
        waiting -= 1;
    }
    let (each, extra) = (left / n, left % n);
    for (k, s) in shares.iter_mut().enumerate() {
        *s += each + u64::from((k as u64) < extra);
    }
    shares
}

/// Splits a bucket's budget between this replica and the others, in proportion to what
/// each side would claim: its streams' floors plus its demand. Alone, the whole budget.
pub fn local_budget(
    budget: u64,
    local_streams: u64,
    local_demand: u64,
    elsewhere: super::Elsewhere,
    floor_permille: u64,
) -> u64 {
    if elsewhere.streams == 0 && elsewhere.demand == 0 {
        return budget;
    }
    let streams = local_streams + elsewhere.streams;
    let floor = ((u128::from(budget) * u128::from(floor_permille.min(1000)) / 1000) as u64)
        .checked_div(streams)
        .unwrap_or(0);
    let mine = u128::from(local_streams * floor) + u128::from(local_demand);
    let theirs = u128::from(elsewhere.streams * floor) + u128::from(elsewhere.demand);
    if mine + theirs == 0 {
        return (u128::from(budget) * u128::from(local_streams) / u128::from(streams.max(1)))
            as u64;
    }
    (u128::from(budget) * mine / (mine + theirs)) as u64
}

/// The token bucket for a share of `share` (thousandths of a request per window of
/// `window_secs`), never faster than the share: whole requests per window when the share
/// holds one, else one request per as many whole seconds as it takes. `None` for a share
/// of nothing.
pub fn token_bucket(share: u64, window_secs: u64) -> Option<TokenBucket> {
    let window_secs = window_secs.max(1);
    let tokens = share / SCALE;
    if tokens >= 1 {
        let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        return Some(TokenBucket {
            max_tokens: tokens,
            tokens_per_fill: tokens,
            fill_interval_secs: window_secs,
        });
    }
    if share == 0 {
        return None;
    }
    let interval = (u128::from(SCALE) * u128::from(window_secs)).div_ceil(u128::from(share));
    Some(TokenBucket {
        max_tokens: 1,
        tokens_per_fill: 1,
        fill_interval_secs: u64::try_from(interval).unwrap_or(u64::MAX),
    })
}

/// Whether a token bucket is no faster than `share` per `window_secs`:
/// `tokens / interval <= share / (SCALE * window)`, compared exactly.
pub fn within(bucket: &TokenBucket, share: u64, window_secs: u64) -> bool {
    u128::from(bucket.tokens_per_fill) * u128::from(SCALE) * u128::from(window_secs)
        <= u128::from(share) * u128::from(bucket.fill_interval_secs)
}
