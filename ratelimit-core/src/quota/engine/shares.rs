//! Deciding every subscription's strategy and share: per budget (a bucket, or the pool of
//! a `share_threshold` rule's buckets), its subscriptions' demands, what departed streams
//! and other replicas hold or claim, and the fair split of the rest.

use std::collections::{BTreeMap, BTreeSet};

use super::{Policy, QuotaEngine, Sub};
use crate::quota::share::{self, SCALE};
use crate::quota::{BucketId, Peers, Strategy, StreamId};

/// One subscription's strategy, its share and the rule's window.
pub(super) type Desired = (StreamId, BucketId, Strategy, u64, u64);

/// A budget: a domain and the pool its buckets draw on.
type PoolKey = (String, BucketId);

impl QuotaEngine {
    /// Every subscription's strategy and share as of `now_ms` (in the budgets of the
    /// buckets of `only`, when given); forgets buckets nobody subscribes to or holds a
    /// share of any more.
    pub(super) fn desired(
        &mut self,
        now_ms: u64,
        peers: &dyn Peers,
        only: Option<&BTreeSet<(String, BucketId)>>,
    ) -> Vec<Desired> {
        if only.is_none() {
            let id_bytes = &mut self.id_bytes;
            self.buckets.retain(|(_, bucket), b| {
                b.held.retain(|h| h.until_ms > now_ms);
                let keep = !b.subscribers.is_empty() || !b.held.is_empty();
                if !keep {
                    *id_bytes = super::freed(super::freed(*id_bytes, bucket), &b.pool);
                }
                keep
            });
        }
        // The budgets to decide, by domain, so that a bucket is checked without copies.
        let wanted: Option<BTreeMap<&str, BTreeSet<&BucketId>>> = only.map(|only| {
            let mut w: BTreeMap<&str, BTreeSet<&BucketId>> = BTreeMap::new();
            for key in only {
                if let Some(b) = self.buckets.get(key) {
                    w.entry(key.0.as_str()).or_default().insert(&b.pool);
                }
            }
            w
        });
        let mut pools: BTreeMap<PoolKey, Vec<&BucketId>> = BTreeMap::new();
        for ((domain, bucket), b) in &self.buckets {
            let in_wanted = |w: &BTreeMap<&str, BTreeSet<&BucketId>>| {
                w.get(domain.as_str()).is_some_and(|p| p.contains(&b.pool))
            };
            if wanted.as_ref().is_none_or(in_wanted) {
                pools
                    .entry((domain.clone(), b.pool.clone()))
                    .or_default()
                    .push(bucket);
            }
        }
        let mut desired = Vec::new();
        for ((domain, pool), buckets) in pools {
            self.decide_pool(&domain, &pool, &buckets, now_ms, peers, &mut desired);
        }
        desired
    }

    fn decide_pool(
        &self,
        domain: &str,
        pool: &BucketId,
        buckets: &[&BucketId],
        now_ms: u64,
        peers: &dyn Peers,
        desired: &mut Vec<Desired>,
    ) {
        let key = |b: &BucketId| (domain.to_owned(), b.clone());
        let members: Vec<_> = buckets
            .iter()
            .filter_map(|b| Some((*b, self.buckets.get(&key(b))?)))
            .collect();
        let Some((_, first)) = members.first() else {
            return;
        };
        // Every subscription to every bucket of the budget, with its demand.
        let subscriptions = members
            .iter()
            .flat_map(|(bucket, b)| b.subscribers.iter().map(move |&s| (s, *bucket)));
        let (requests, window_secs) = match first.policy {
            Policy::AllowAll | Policy::DenyAll => {
                let strategy = if first.policy == Policy::AllowAll {
                    Strategy::AllowAll
                } else {
                    Strategy::DenyAll
                };
                for (s, bucket) in subscriptions {
                    desired.push((s, bucket.clone(), strategy, 0, 1));
                }
                return;
            }
            Policy::Limit {
                requests,
                window_secs,
            } => (requests, window_secs),
        };
        let window_ms = self.settings.demand_window_secs * 1000;
        let floor = self.settings.floor_permille;
        let subscriptions: Vec<(StreamId, &BucketId, u64)> = subscriptions
            .map(|(s, bucket)| {
                let d = self
                    .streams
                    .get(&s)
                    .and_then(|st| st.subs.get(bucket))
                    .map_or(0, |sub| demand(sub, window_secs, now_ms, window_ms));
                (s, bucket, d)
            })
            .collect();
        if subscriptions.is_empty() {
            return;
        }
        let demands: Vec<u64> = subscriptions.iter().map(|(_, _, d)| *d).collect();
        // Shares still held by departed streams, here and elsewhere, come off first; the
        // rest is split between the replicas by what they claim.
        let held: u64 = members
            .iter()
            .flat_map(|(_, b)| b.held.iter().map(|h| h.share))
            .sum();
        let elsewhere = peers.elsewhere(domain, pool);
        let budget = requests
            .saturating_mul(SCALE)
            .saturating_sub(held)
            .saturating_sub(elsewhere.held);
        let local = share::local_budget(
            budget,
            demands.len() as u64,
            demands.iter().fold(0u64, |a, d| a.saturating_add(*d)),
            elsewhere,
            floor,
        );
        let shares = share::fair_shares(local, &demands, floor);
        for ((s, bucket, _), share) in subscriptions.into_iter().zip(shares) {
            let strategy = share::token_bucket(share, window_secs)
                .map_or(Strategy::DenyAll, Strategy::TokenBucket);
            desired.push((s, bucket.clone(), strategy, share, window_secs));
        }
    }
}

/// A subscription's demand: requests per second over its recent reports, in
/// [`SCALE`]d requests per window of `window_secs`. A report covers at least a second.
pub(super) fn demand(sub: &Sub, window_secs: u64, now_ms: u64, demand_window_ms: u64) -> u64 {
    let (requests, elapsed) = sub
        .samples
        .iter()
        .filter(|s| s.at_ms.saturating_add(demand_window_ms) >= now_ms)
        .fold((0u128, 0u128), |(r, e), s| {
            (r + u128::from(s.requests), e + u128::from(s.elapsed_ms))
        });
    let per_window =
        requests * u128::from(SCALE) * u128::from(window_secs) * 1000 / elapsed.max(1000);
    u64::try_from(per_window).unwrap_or(u64::MAX)
}
