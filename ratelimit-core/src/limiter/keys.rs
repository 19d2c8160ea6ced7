//! The cache keys of the plan: upstream's key format (prefix, domain, entries, window
//! start) written into reused strings, and the expiry of each key.

use std::fmt::Write as _;
use std::sync::Arc;

use super::Limiter;
use crate::algorithm::{Algorithm, window_start};
use crate::clock::Clock;
use crate::clock::Now;
use crate::key_id::KeyId;
use crate::rules::{Limit, Rule, cache_key_stem_into, key_id};
use crate::stats::sanitize_stat_name;
use crate::store::{CounterStore, Increment, Op};
use crate::types::Descriptor;

impl<S: CounterStore, C: Clock> Limiter<S, C> {
    /// Writes the next increment of the batch (reusing an earlier request's key string)
    /// for `limit` and returns its slot. `joint`: decided with the increment before it
    /// (a rule's limits after its first).
    #[allow(clippy::too_many_arguments)] // one call site per kind of target; a struct adds nothing
    #[inline(always)] // a call's prologue and spills cost as much as the hot path's body
    pub(super) fn push_increment(
        &self,
        (batch, used): (&mut Vec<Increment>, &mut usize),
        window_text: &mut (u64, String),
        rule: Option<&Arc<Rule>>,
        domain: &str,
        d: &Descriptor,
        limit: &Limit,
        (hits, joint): (u64, bool),
        now: Now,
    ) -> usize {
        let prefix = &self.settings.cache_key_prefix;
        if *used == batch.len() {
            batch.push(Increment::window(String::new(), 0, limit.unit, 0));
        }
        let slot = *used;
        let inc = &mut batch[slot];
        *used += 1;
        let (op, ttl) = match limit.algorithm {
            Algorithm::FixedWindow { seconds } => {
                (Op::Window { seconds }, seconds.min(MAX_TTL_SECONDS))
            }
            Algorithm::SlidingWindow { seconds } => (
                Op::Slide {
                    window_us: seconds.saturating_mul(1_000_000),
                    now_us: now.micros,
                },
                // The previous window is read until the current one ends.
                seconds.saturating_mul(2).min(MAX_TTL_SECONDS),
            ),
            Algorithm::TokenBucket(b) => (
                Op::Bucket {
                    interval_us: b.interval_us,
                    now_us: now.micros,
                },
                b.refill_seconds + 1,
            ),
        };
        let at = (prefix.as_str(), domain);
        inc.id = match rule {
            _ if !self.by_id => KeyId::default(),
            Some(r) => r.matched_key_id(limit, at, &d.entries),
            None => key_id(limit, at, &d.entries),
        };
        if self.key_text {
            let key = &mut inc.key;
            // No reserve up front: the slot's key usually has room from an earlier
            // request, and summing the entries' lengths first costs more than the odd
            // regrowth.
            match rule {
                Some(r) => r.matched_key_stem_into(key, prefix, domain, &d.entries),
                None => cache_key_stem_into(key, prefix, domain, &d.entries),
            }
            if limit.joint {
                joint_key(key);
            }
            // None for upstream's keys.
            if !limit.key_tag.is_empty() {
                key.push_str(&limit.key_tag);
            }
            if let Algorithm::FixedWindow { seconds } = limit.algorithm {
                let window = window_start(now.secs, seconds);
                if window_text.0 != window {
                    window_text.1.clear();
                    let _ = write!(window_text.1, "{window}");
                    window_text.0 = window;
                }
                key.push_str(&window_text.1);
            }
        }
        inc.ttl_seconds = ttl + jitter(&inc.key, self.jitter_max);
        inc.hits = hits;
        inc.unit = limit.unit;
        inc.op = op;
        inc.limit = match limit.algorithm {
            Algorithm::TokenBucket(b) => b.capacity,
            _ => u64::from(limit.requests_per_unit),
        };
        inc.joint = joint;
        slot
    }
}

/// Wraps the descriptor part of a joint rule's key in braces: a Redis Cluster hash tag
/// that puts the limits of one descriptor on one slot.
#[cold]
fn joint_key(key: &mut String) {
    key.insert(0, '{');
    key.push('}');
}

/// The longest expiry a key is given: a century. A window of more units than that is
/// still counted as one, but Redis refuses expiries whose milliseconds pass `i64`.
const MAX_TTL_SECONDS: u64 = 100 * 365 * 86_400;

/// Spreads key expiry over `[0, max)` seconds. Upstream draws a random number per request;
/// a hash of the key spreads expiries just as well, needs no randomness source in a pure
/// crate, and keeps a key's TTL stable across its refreshes.
#[inline]
pub(super) fn jitter(key: &str, max: u64) -> u64 {
    if max == 0 { 0 } else { key_hash(key) % max }
}

/// A cheap hash of a key, for [`jitter`]: keys are hashed on every decision, and quality
/// is irrelevant beyond spreading values.
fn key_hash(key: &str) -> u64 {
    // Eight bytes per step, a multiply-xorshift mix.
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = key.len() as u64;
    let mut words = key.as_bytes().chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(<[u8; 8]>::try_from(w).unwrap_or_default());
        h = (h ^ w).wrapping_mul(K);
        h ^= h >> 32;
    }
    let rest = words.remainder();
    let last = if rest.is_empty() {
        0
    } else if key.len() >= 8 {
        // The last eight bytes, overlapping the words already mixed: a fixed-size read
        // instead of copying a tail of unknown length.
        let end = &key.as_bytes()[key.len() - 8..];
        u64::from_le_bytes(<[u8; 8]>::try_from(end).unwrap_or_default())
    } else {
        rest.iter().fold(0, |acc, b| (acc << 8) | u64::from(*b))
    };
    h = (h ^ last).wrapping_mul(K);
    h ^ (h >> 32)
}

/// Upstream's stats key for a request override: `domain.` + entries as `key_value`
/// (or `key` when the value is empty), joined by dots.
pub(super) fn override_stats_key(domain: &str, d: &Descriptor) -> String {
    let mut s = String::with_capacity(domain.len() + 32);
    s.push_str(domain);
    for e in &d.entries {
        s.push('.');
        s.push_str(&e.key);
        if !e.value.is_empty() {
            s.push('_');
            s.push_str(&e.value);
        }
    }
    sanitize_stat_name(&s)
}
