//! The engine's state: streams, their subscriptions, and the buckets they share.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::share;
use super::{
    Action, BucketId, Peers, Policy, QuotaSettings, Strategy, StreamId, Usage, bucket_id_bytes,
    policy, rule_stats,
};
use crate::rules::RuleSet;
use crate::stats::{RuleStats, StatDelta};

mod claims;
mod shares;

/// RLQS assignments for every connected stream, decided from the rules and the usage the
/// streams report. Pure: the caller feeds it events with the time they happened (in
/// milliseconds on any monotonic clock) and sends out what [`QuotaEngine::tick`] returns.
///
/// The shares of a limited bucket never add up to more than its rule's budget. That
/// includes the shares of streams that went away: Envoy keeps enforcing an assignment
/// until its TTL runs out, so a departed stream's share stays held until then, unless
/// the same client (as named on [`QuotaEngine::connect`]) subscribes to the bucket again.
#[derive(Debug)]
pub struct QuotaEngine {
    rules: Arc<RuleSet>,
    settings: QuotaSettings,
    streams: BTreeMap<StreamId, Stream>,
    buckets: BTreeMap<(String, BucketId), Bucket>,
    /// Buckets that gained a subscriber since the last tick.
    fresh: BTreeSet<(String, BucketId)>,
    /// Buckets reported beyond the caps, to be abandoned on the stream that reported them.
    refused: BTreeMap<StreamId, BTreeSet<BucketId>>,
    /// [`bucket_id_bytes`] of every tracked bucket and every subscription, held to
    /// [`QuotaSettings::max_bucket_bytes`].
    id_bytes: usize,
}

/// Reports kept per subscription for its demand: Envoy sends one per bucket every 5 s,
/// so a demand window of a minute or two fits; a client reporting faster only loses
/// its oldest samples.
const MAX_SAMPLES: usize = 32;

#[derive(Debug)]
struct Stream {
    domain: String,
    client: Option<String>,
    subs: BTreeMap<BucketId, Sub>,
}

/// One stream's subscription to one bucket.
#[derive(Debug)]
struct Sub {
    /// The matching rule's counters, fed by the reports (none without a rule).
    stats: Option<Arc<RuleStats>>,
    samples: VecDeque<Sample>,
    last_request_ms: u64,
    sent: Option<Sent>,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ms: u64,
    requests: u64,
    elapsed_ms: u64,
}

/// The assignment the stream holds: what was sent, when, and the share it stays within.
#[derive(Debug, Clone, Copy)]
struct Sent {
    strategy: Strategy,
    at_ms: u64,
    share: u64,
}

#[derive(Debug)]
struct Bucket {
    policy: Policy,
    /// The budget it draws on ([`RuleSet::bucket_pool`]): itself, or the pattern shared by
    /// every bucket of a `share_threshold` rule.
    pool: BucketId,
    subscribers: BTreeSet<StreamId>,
    held: Vec<Held>,
}

/// A share a departed stream's Envoy may still be enforcing.
#[derive(Debug)]
struct Held {
    client: Option<String>,
    until_ms: u64,
    share: u64,
}

impl QuotaEngine {
    /// An engine with no streams.
    pub fn new(rules: Arc<RuleSet>, settings: QuotaSettings) -> Self {
        QuotaEngine {
            rules,
            settings: settings.normalized(),
            streams: BTreeMap::new(),
            buckets: BTreeMap::new(),
            fresh: BTreeSet::new(),
            refused: BTreeMap::new(),
            id_bytes: 0,
        }
    }

    /// The settings in force (normalized).
    pub fn settings(&self) -> &QuotaSettings {
        &self.settings
    }

    /// Swaps the rules; every bucket's policy is looked up again and takes effect at the
    /// next [`QuotaEngine::tick`].
    pub fn set_rules(&mut self, rules: Arc<RuleSet>) {
        self.rules = rules;
        for ((domain, bucket), b) in &mut self.buckets {
            b.policy = policy(&self.rules, domain, bucket, self.settings.no_match);
            let pool = pool_of(&self.rules, domain, bucket);
            self.id_bytes = freed(self.id_bytes, &b.pool) + bucket_id_bytes(&pool);
            b.pool = pool;
        }
        for st in self.streams.values_mut() {
            for (bucket, sub) in &mut st.subs {
                sub.stats = rule_stats(&self.rules, &st.domain, bucket);
            }
        }
    }

    /// A stream opened for `domain` (its first message). `client` names the Envoy behind
    /// it when the caller can tell (its address, say), so that a reconnecting Envoy gets
    /// its held shares back. A stream already known keeps its state.
    pub fn connect(&mut self, stream: StreamId, domain: &str, client: Option<&str>) {
        self.streams.entry(stream).or_insert_with(|| Stream {
            domain: domain.to_owned(),
            client: client.map(str::to_owned),
            subs: BTreeMap::new(),
        });
    }

    /// The domain of a connected stream.
    pub fn domain(&self, stream: StreamId) -> Option<&str> {
        self.streams.get(&stream).map(|s| s.domain.as_str())
    }

    /// A stream ended. Its shares stay held until their assignments' TTL runs out.
    pub fn disconnect(&mut self, stream: StreamId) {
        self.refused.remove(&stream);
        let Some(st) = self.streams.remove(&stream) else {
            return;
        };
        let ttl_ms = self.settings.assignment_ttl_secs * 1000;
        for (bucket, sub) in st.subs {
            self.id_bytes = freed(self.id_bytes, &bucket);
            let key = (st.domain.clone(), bucket);
            let Some(b) = self.buckets.get_mut(&key) else {
                continue;
            };
            b.subscribers.remove(&stream);
            if let Some(sent) = sub.sent.filter(|s| s.share > 0) {
                b.held.push(Held {
                    client: st.client.clone(),
                    until_ms: sent.at_ms.saturating_add(ttl_ms),
                    share: sent.share,
                });
            }
        }
    }

    /// A stream's usage reports. A bucket's first report subscribes the stream to it,
    /// unless the stream or the engine is at its cap of buckets
    /// ([`QuotaSettings::max_buckets_per_stream`], [`QuotaSettings::max_buckets`]) or of
    /// their ids' bytes ([`QuotaSettings::max_bucket_bytes`]): such a bucket is abandoned
    /// at the next tick, and Envoy's filter falls back to its `no_assignment_behavior`
    /// for it. Reports on a stream that is not connected are ignored.
    pub fn report(&mut self, stream: StreamId, usages: &[Usage], now_ms: u64) {
        let Some(st) = self.streams.get_mut(&stream) else {
            return;
        };
        let window_ms = self.settings.demand_window_secs * 1000;
        for u in usages {
            if !st.subs.contains_key(&u.bucket) {
                let key = (st.domain.clone(), u.bucket.clone());
                let known = self.buckets.contains_key(&key);
                // The subscription's copy of the id; for a new bucket also the table's key
                // and the budget it draws on.
                let pool = (!known).then(|| pool_of(&self.rules, &st.domain, &u.bucket));
                let cost = bucket_id_bytes(&u.bucket)
                    + pool
                        .as_ref()
                        .map_or(0, |pool| bucket_id_bytes(&u.bucket) + bucket_id_bytes(pool));
                if st.subs.len() >= self.settings.max_buckets_per_stream
                    || (!known && self.buckets.len() >= self.settings.max_buckets)
                    || self.id_bytes.saturating_add(cost) > self.settings.max_bucket_bytes
                {
                    self.refused
                        .entry(stream)
                        .or_default()
                        .insert(u.bucket.clone());
                    continue;
                }
                let b = self.buckets.entry(key.clone()).or_insert_with(|| Bucket {
                    policy: policy(&self.rules, &st.domain, &u.bucket, self.settings.no_match),
                    pool: pool.unwrap_or_else(|| pool_of(&self.rules, &st.domain, &u.bucket)),
                    subscribers: BTreeSet::new(),
                    held: Vec::new(),
                });
                self.fresh.insert(key);
                self.id_bytes += cost;
                b.subscribers.insert(stream);
                if st.client.is_some() {
                    b.held.retain(|h| h.client != st.client);
                }
                st.subs.insert(
                    u.bucket.clone(),
                    Sub {
                        stats: rule_stats(&self.rules, &st.domain, &u.bucket),
                        samples: VecDeque::new(),
                        last_request_ms: now_ms,
                        sent: None,
                    },
                );
            }
            let Some(sub) = st.subs.get_mut(&u.bucket) else {
                continue;
            };
            let requests = u.allowed.saturating_add(u.denied);
            if requests > 0 {
                sub.last_request_ms = now_ms;
                if let Some(stats) = &sub.stats {
                    stats.add(&StatDelta {
                        total_hits: requests,
                        within_limit: u.allowed,
                        over_limit: u.denied,
                        ..StatDelta::default()
                    });
                }
            }
            if sub.samples.len() == MAX_SAMPLES {
                sub.samples.pop_front();
            }
            sub.samples.push_back(Sample {
                at_ms: now_ms,
                requests,
                elapsed_ms: u.elapsed_ms,
            });
            while sub
                .samples
                .front()
                .is_some_and(|s| s.at_ms.saturating_add(window_ms) < now_ms)
            {
                sub.samples.pop_front();
            }
        }
    }

    /// Decides at `now_ms`: abandons idle subscriptions, recomputes every bucket's
    /// shares, and returns per stream (in stream order) the actions to send: abandons,
    /// new or changed assignments, and unchanged ones due for a refresh.
    pub fn tick(&mut self, now_ms: u64, peers: &dyn Peers) -> Vec<(StreamId, Vec<Action>)> {
        self.fresh.clear();
        self.decide(now_ms, peers, None)
    }

    /// [`QuotaEngine::tick`] for only the buckets that gained a subscriber since the last
    /// tick: what a report needs answered at once (a new subscription's assignment, and the
    /// smaller shares of the bucket's other streams). Demand shifts, refreshes and abandons
    /// wait for the next full tick, which the caller runs every second or so.
    pub fn tick_fresh(&mut self, now_ms: u64, peers: &dyn Peers) -> Vec<(StreamId, Vec<Action>)> {
        if self.fresh.is_empty() && self.refused.is_empty() {
            return Vec::new();
        }
        let fresh = std::mem::take(&mut self.fresh);
        self.decide(now_ms, peers, Some(&fresh))
    }

    fn decide(
        &mut self,
        now_ms: u64,
        peers: &dyn Peers,
        only: Option<&BTreeSet<(String, BucketId)>>,
    ) -> Vec<(StreamId, Vec<Action>)> {
        let mut out: BTreeMap<StreamId, Vec<Action>> = BTreeMap::new();
        for (stream, buckets) in std::mem::take(&mut self.refused) {
            out.entry(stream)
                .or_default()
                .extend(buckets.into_iter().map(|bucket| Action::Abandon { bucket }));
        }
        if only.is_none() {
            self.abandon_idle(now_ms, &mut out);
        }
        let desired = self.desired(now_ms, peers, only);
        let ttl_secs = self.settings.assignment_ttl_secs;
        let refresh_ms = self.settings.refresh_secs * 1000;
        let change = self.settings.change_permille;
        for (stream, bucket, strategy, share, window_secs) in desired {
            let Some(sub) = self
                .streams
                .get_mut(&stream)
                .and_then(|st| st.subs.get_mut(&bucket))
            else {
                continue;
            };
            // A changed strategy is sent, unless the sent token bucket stays (`keeps`): then
            // it is refreshed like an unchanged one, and now stays within the new share.
            let (send, due) = match &mut sub.sent {
                Some(sent)
                    if sent.strategy == strategy
                        || keeps(sent, strategy, share, window_secs, change) =>
                {
                    sent.share = share;
                    (
                        sent.strategy,
                        now_ms.saturating_sub(sent.at_ms) >= refresh_ms,
                    )
                }
                _ => (strategy, true),
            };
            if due {
                sub.sent = Some(Sent {
                    strategy: send,
                    at_ms: now_ms,
                    share,
                });
                out.entry(stream).or_default().push(Action::Assign {
                    bucket,
                    strategy: send,
                    ttl_secs,
                });
            }
        }
        out.into_iter().collect()
    }

    fn abandon_idle(&mut self, now_ms: u64, out: &mut BTreeMap<StreamId, Vec<Action>>) {
        let idle_ms = self.settings.abandon_after_secs * 1000;
        for (&id, st) in &mut self.streams {
            let idle: Vec<BucketId> = st
                .subs
                .iter()
                .filter(|(_, s)| now_ms.saturating_sub(s.last_request_ms) >= idle_ms)
                .map(|(b, _)| b.clone())
                .collect();
            for bucket in idle {
                st.subs.remove(&bucket);
                self.id_bytes = freed(self.id_bytes, &bucket);
                if let Some(b) = self.buckets.get_mut(&(st.domain.clone(), bucket.clone())) {
                    b.subscribers.remove(&id);
                }
                out.entry(id).or_default().push(Action::Abandon { bucket });
            }
        }
    }

    /// Every assignment streams hold: stream, domain, bucket, strategy, and the share
    /// (thousandths of a request per rule window; 0 for blanket rules) it stays within.
    pub fn assignments(&self) -> impl Iterator<Item = (StreamId, &str, &BucketId, Strategy, u64)> {
        self.streams.iter().flat_map(|(&id, st)| {
            st.subs.iter().filter_map(move |(b, sub)| {
                sub.sent
                    .map(|s| (id, st.domain.as_str(), b, s.strategy, s.share))
            })
        })
    }

    /// The shares departed streams still hold in a bucket.
    pub fn held(&self, domain: &str, bucket: &BucketId) -> u64 {
        self.buckets
            .get(&(domain.to_owned(), bucket.clone()))
            .map_or(0, |b| b.held.iter().map(|h| h.share).sum())
    }

    /// A tracked bucket's policy.
    pub fn policy(&self, domain: &str, bucket: &BucketId) -> Option<Policy> {
        self.buckets
            .get(&(domain.to_owned(), bucket.clone()))
            .map(|b| b.policy)
    }

    /// The bytes of bucket ids kept, as [`QuotaSettings::max_bucket_bytes`] counts them.
    pub fn bucket_id_bytes(&self) -> usize {
        self.id_bytes
    }

    /// [`QuotaEngine::bucket_id_bytes`] counted afresh from the tables, for the tests to
    /// hold the running count to.
    #[cfg(test)]
    pub(crate) fn bucket_id_bytes_recounted(&self) -> usize {
        let table: usize = (self.buckets.iter())
            .map(|((_, id), b)| bucket_id_bytes(id) + bucket_id_bytes(&b.pool))
            .sum();
        let subs: usize = (self.streams.values())
            .flat_map(|st| st.subs.keys())
            .map(bucket_id_bytes)
            .sum();
        table + subs
    }

    /// Whether a stream is subscribed to a bucket.
    pub fn subscribed(&self, stream: StreamId, bucket: &BucketId) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|st| st.subs.contains_key(bucket))
    }
}

/// `total` once a copy of `bucket` is gone.
fn freed(total: usize, bucket: &BucketId) -> usize {
    let cost = bucket_id_bytes(bucket);
    debug_assert!(
        total >= cost,
        "bucket id bytes counted {total}, freeing {cost}"
    );
    total.saturating_sub(cost)
}

/// Whether the sent token bucket stays instead of `new`: it fits the new share, and `new`
/// is not slower and faster by at most `change_permille` thousandths.
fn keeps(sent: &Sent, new: Strategy, share: u64, window_secs: u64, change_permille: u64) -> bool {
    let (Strategy::TokenBucket(old), Strategy::TokenBucket(new)) = (sent.strategy, new) else {
        return false;
    };
    if !share::within(&old, share, window_secs) {
        return false;
    }
    // new.t / new.i <= old.t / old.i * (1 + p/1000), in integers.
    let new_rate = u128::from(new.tokens_per_fill) * u128::from(old.fill_interval_secs);
    let old_rate = u128::from(old.tokens_per_fill) * u128::from(new.fill_interval_secs);
    new_rate * 1000 <= old_rate * u128::from(1000 + change_permille.min(1_000_000))
}

/// The budget `bucket` draws on: see [`RuleSet::bucket_pool`]; itself when no rule matches.
fn pool_of(rules: &RuleSet, domain: &str, bucket: &BucketId) -> BucketId {
    rules
        .bucket_pool(domain, bucket)
        .unwrap_or_else(|| bucket.clone())
}
