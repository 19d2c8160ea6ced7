//! What this replica claims of its buckets, for replicas that share budgets.

use super::{Policy, QuotaEngine, demand};
use crate::quota::{BucketId, Claim, Elsewhere};

impl QuotaEngine {
    /// What this replica claims of each limited bucket it has subscribers for, as of
    /// `now_ms`: the number of streams and their summed demand, in the units of
    /// [`Elsewhere`], for the other replicas' [`Peers`](crate::quota::Peers). Shares that
    /// departed streams' Envoys may still be enforcing are claimed too, as `held`, so
    /// that no other replica hands them out meanwhile.
    pub fn claims(&self, now_ms: u64) -> Vec<Claim> {
        self.buckets
            .keys()
            .filter_map(|(domain, bucket)| self.claim(domain, bucket, now_ms))
            .collect()
    }

    /// [`QuotaEngine::claims`] of the buckets that gained a subscriber since the last
    /// tick: what a replica publishes before it answers their first reports.
    pub fn fresh_claims(&self, now_ms: u64) -> Vec<Claim> {
        self.fresh
            .iter()
            .filter_map(|(domain, bucket)| self.claim(domain, bucket, now_ms))
            .collect()
    }

    /// Buckets tracked (subscribed to, or with shares still held).
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Streams connected.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    fn claim(&self, domain: &str, bucket: &BucketId, now_ms: u64) -> Option<Claim> {
        let key = (domain.to_owned(), bucket.clone());
        let b = self.buckets.get(&key)?;
        let Policy::Limit { window_secs, .. } = b.policy else {
            return None;
        };
        if b.subscribers.is_empty() && b.held.iter().all(|h| h.until_ms <= now_ms) {
            return None;
        }
        let held: u64 = b
            .held
            .iter()
            .filter(|h| h.until_ms > now_ms)
            .map(|h| h.share)
            .sum();
        let window_ms = self.settings.demand_window_secs * 1000;
        let demand = b
            .subscribers
            .iter()
            .filter_map(|s| self.streams.get(s)?.subs.get(bucket))
            .map(|sub| demand(sub, window_secs, now_ms, window_ms))
            .fold(0u64, u64::saturating_add);
        let (domain, bucket) = key;
        Some(Claim {
            domain,
            bucket,
            here: Elsewhere {
                streams: b.subscribers.len() as u64,
                demand,
                held,
            },
        })
    }
}
