//! What this replica claims of its budgets, for replicas that share them.

use std::collections::{BTreeMap, BTreeSet};

use super::QuotaEngine;
use super::shares::demand;
use crate::quota::{BucketId, Claim, Elsewhere, Policy};

impl QuotaEngine {
    /// What this replica claims of each limited budget (a bucket, or a `share_threshold`
    /// pool) it has subscribers for, as of `now_ms`: the number of subscriptions and their
    /// summed demand, in the units of [`Elsewhere`], for the other replicas'
    /// [`Peers`](crate::quota::Peers). Shares that departed streams' Envoys may still be
    /// enforcing are claimed too, as `held`, so that no other replica hands them out
    /// meanwhile.
    pub fn claims(&self, now_ms: u64) -> Vec<Claim> {
        self.claims_of(None, now_ms)
    }

    /// [`QuotaEngine::claims`] of the budgets of buckets that gained a subscriber since
    /// the last tick: what a replica publishes before it answers their first reports.
    pub fn fresh_claims(&self, now_ms: u64) -> Vec<Claim> {
        let pools: BTreeSet<(String, BucketId)> = self
            .fresh
            .iter()
            .filter_map(|key| Some((key.0.clone(), self.buckets.get(key)?.pool.clone())))
            .collect();
        self.claims_of(Some(&pools), now_ms)
    }

    /// Buckets tracked (subscribed to, or with shares still held).
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Streams connected.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    fn claims_of(&self, only: Option<&BTreeSet<(String, BucketId)>>, now_ms: u64) -> Vec<Claim> {
        let window_ms = self.settings.demand_window_secs * 1000;
        let mut pools: BTreeMap<(String, BucketId), Elsewhere> = BTreeMap::new();
        for ((domain, bucket), b) in &self.buckets {
            let Policy::Limit { window_secs, .. } = b.policy else {
                continue;
            };
            let pool = (domain.clone(), b.pool.clone());
            if only.is_some_and(|only| !only.contains(&pool)) {
                continue;
            }
            let held: u64 = b
                .held
                .iter()
                .filter(|h| h.until_ms > now_ms)
                .map(|h| h.share)
                .sum();
            if b.subscribers.is_empty() && held == 0 {
                continue;
            }
            let demand = b
                .subscribers
                .iter()
                .filter_map(|s| self.streams.get(s)?.subs.get(bucket))
                .map(|sub| demand(sub, window_secs, now_ms, window_ms))
                .fold(0u64, u64::saturating_add);
            let claim = pools.entry(pool).or_default();
            claim.streams += b.subscribers.len() as u64;
            claim.demand = claim.demand.saturating_add(demand);
            claim.held = claim.held.saturating_add(held);
        }
        pools
            .into_iter()
            .map(|((domain, bucket), here)| Claim {
                domain,
                bucket,
                here,
            })
            .collect()
    }
}
