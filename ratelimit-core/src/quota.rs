//! Envoy's Rate Limit Quota Service (RLQS), the pure part: usage reports in, per-stream
//! bucket actions out, on a clock the caller supplies.
//!
//! Envoy groups requests into buckets (a [`BucketId`], a map of names to values), reports
//! each bucket's usage every few seconds on a stream opened per domain, and enforces what
//! the server assigns: a blanket allow or deny, or a token bucket. This module decides
//! those assignments; the server only carries them (see `docs/rlqs.md`).
//!
//! - A bucket's policy comes from the domain's rules ([`RuleSet::find_bucket`]): an
//!   `unlimited` rule or one in shadow mode allows all, a limit of 0 denies all, a limit
//!   is shared out, and no rule means [`QuotaSettings::no_match`].
//! - A limited bucket's budget (the rule's requests per window) is split between the
//!   streams subscribed to it by [`share::fair_shares`]: every stream keeps a floor, the
//!   rest goes max-min fair by measured demand, and what nobody asks for is split evenly.
//!   The shares of a bucket never add up to more than the rule allows, the shares still
//!   held by streams that went away included (see [`QuotaEngine`]).
//! - Shares become token buckets Envoy 1.40 can enforce ([`share::token_bucket`]):
//!   `tokens_per_fill` always set, `fill_interval` whole seconds and at least one.
//!
//! Everything here is deterministic: no I/O, no clock, no randomness. Replicas of the
//! server see each other's demand through [`Peers`], fed by the [`Claim`]s each publishes.

use std::collections::BTreeMap;

use crate::rules::RuleSet;

mod engine;
pub mod share;
#[cfg(test)]
mod tests;

pub use engine::QuotaEngine;

/// An RLQS bucket id: Envoy's `BucketId.bucket` map. Names are ordered, so two maps with
/// the same entries are the same bucket whatever order they came in.
pub type BucketId = BTreeMap<String, String>;

/// One stream from one Envoy, numbered by the caller.
pub type StreamId = u64;

/// A bucket's usage since the previous report, as Envoy reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The bucket.
    pub bucket: BucketId,
    /// Requests let through.
    pub allowed: u64,
    /// Requests refused.
    pub denied: u64,
    /// Time since the previous report of the bucket, in milliseconds (0 on a first report).
    pub elapsed_ms: u64,
}

/// What Envoy is told to do with a bucket's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// `blanket_rule: ALLOW_ALL`.
    AllowAll,
    /// `blanket_rule: DENY_ALL`.
    DenyAll,
    /// `token_bucket`.
    TokenBucket(TokenBucket),
}

/// A token bucket as Envoy 1.40 enforces it: it starts full, holds at most `max_tokens`,
/// and gains `tokens_per_fill` per `fill_interval_secs`, continuously.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenBucket {
    /// The bucket's size, also its content when the assignment is new.
    pub max_tokens: u32,
    /// Tokens per interval; at least 1 (Envoy reads an unset field as 0: no refill).
    pub tokens_per_fill: u32,
    /// The interval in whole seconds; at least 1 (under a second Envoy allows everything).
    pub fill_interval_secs: u64,
}

/// One instruction for one bucket of one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `quota_assignment_action`.
    Assign {
        /// The bucket as Envoy reported it.
        bucket: BucketId,
        /// What to enforce.
        strategy: Strategy,
        /// `assignment_time_to_live`, whole seconds.
        ttl_secs: u64,
    },
    /// `abandon_action`: Envoy forgets the bucket until its next request.
    Abandon {
        /// The bucket.
        bucket: BucketId,
    },
}

impl Action {
    /// The bucket the action is about.
    pub fn bucket(&self) -> &BucketId {
        match self {
            Action::Assign { bucket, .. } | Action::Abandon { bucket } => bucket,
        }
    }
}

/// The blanket answer for buckets no rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NoMatch {
    /// Let everything through (the default, as RLS answers OK without a rule).
    #[default]
    AllowAll,
    /// Refuse everything.
    DenyAll,
}

/// The engine's knobs. Times are in seconds unless named otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaSettings {
    /// The answer for buckets no rule matches (and for unknown domains).
    pub no_match: NoMatch,
    /// `assignment_time_to_live` of every assignment. Envoy falls back to its
    /// `no_assignment_behavior` when it runs out, so assignments are re-sent well before.
    pub assignment_ttl_secs: u64,
    /// An unchanged assignment is re-sent after this long (less than the TTL).
    pub refresh_secs: u64,
    /// A stream's bucket with no request for this long is abandoned.
    pub abandon_after_secs: u64,
    /// Demand is measured over the reports of this last stretch of time.
    pub demand_window_secs: u64,
    /// Thousandths of a bucket's budget set aside as floors, split evenly between its
    /// streams whatever their demand, so an idle Envoy can still start.
    pub floor_permille: u64,
    /// Envoy starts a changed token bucket full, so a stream keeps its token bucket while
    /// that still fits its share and the new one would be faster by no more than these
    /// thousandths (slower ones are always sent: the budget's bound comes first).
    pub change_permille: u64,
    /// Buckets one stream may subscribe to; its reports of further buckets are answered
    /// with an abandon, leaving those to the filter's fallback.
    pub max_buckets_per_stream: usize,
    /// Buckets tracked for all streams together, the bound on the engine's memory.
    pub max_buckets: usize,
    /// Bytes of bucket ids kept for all streams together, as [`bucket_id_bytes`] counts
    /// them: a tracked bucket's id and the budget it draws on (its own id again, or its
    /// `share_threshold` rule's pattern), and the id once more for each subscription to
    /// it. Reports of further buckets are answered with abandons, as over the counts: the
    /// counts alone leave memory to the length of the ids, which Envoy takes from request
    /// headers.
    pub max_bucket_bytes: usize,
}

/// What keeping one copy of a bucket id costs, as [`QuotaSettings::max_bucket_bytes`]
/// counts it: its names' and values' bytes, plus 64 for each entry's two strings and
/// its place in the map.
pub fn bucket_id_bytes(bucket: &BucketId) -> usize {
    bucket
        .iter()
        .map(|(name, value)| name.len() + value.len() + 64)
        .sum()
}

impl Default for QuotaSettings {
    fn default() -> Self {
        QuotaSettings {
            no_match: NoMatch::AllowAll,
            assignment_ttl_secs: 30,
            refresh_secs: 10,
            abandon_after_secs: 300,
            demand_window_secs: 30,
            floor_permille: 100,
            change_permille: 200,
            max_buckets_per_stream: 10_000,
            max_buckets: 100_000,
            max_bucket_bytes: 64 << 20,
        }
    }
}

impl QuotaSettings {
    /// Makes the settings coherent: a TTL of at least 2 s, a refresh of at least 1 s and
    /// under the TTL, a demand window of at least 1 s, a floor of at most the whole budget.
    pub fn normalized(mut self) -> Self {
        self.assignment_ttl_secs = self.assignment_ttl_secs.max(2);
        self.refresh_secs = self.refresh_secs.clamp(1, self.assignment_ttl_secs - 1);
        self.demand_window_secs = self.demand_window_secs.max(1);
        self.floor_permille = self.floor_permille.min(1000);
        self
    }
}

/// What the other replicas of the server see of a bucket (in the server: an aggregate kept
/// in Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Elsewhere {
    /// Streams subscribed to the bucket on other replicas.
    pub streams: u64,
    /// Their demand, in [`share::SCALE`]d requests per rule window.
    pub demand: u64,
    /// Shares (same units) that the Envoys of streams gone from other replicas may still
    /// enforce until their assignments' TTL: taken off the budget before it is split.
    pub held: u64,
}

/// What this replica claims of a limited bucket, for the other replicas to see: its
/// streams and their demand (see [`QuotaEngine::claims`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The stream's domain.
    pub domain: String,
    /// The bucket.
    pub bucket: BucketId,
    /// Streams subscribed here, and their demand: what the other replicas see as
    /// [`Elsewhere`].
    pub here: Elsewhere,
}

/// The view of other replicas, asked once per limited bucket and tick.
pub trait Peers {
    /// The bucket's streams and demand on other replicas.
    fn elsewhere(&self, domain: &str, bucket: &BucketId) -> Elsewhere;
}

/// A server alone: nothing elsewhere, the whole budget is local.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPeers;

impl Peers for NoPeers {
    fn elsewhere(&self, _: &str, _: &BucketId) -> Elsewhere {
        Elsewhere::default()
    }
}

/// The counters of the rule `bucket` matches in `domain`, which its reports feed.
pub fn rule_stats(
    rules: &RuleSet,
    domain: &str,
    bucket: &BucketId,
) -> Option<std::sync::Arc<crate::stats::RuleStats>> {
    match rules.find_bucket(domain, bucket) {
        crate::rules::Match::Rule(rule) => Some(rule.stats.clone()),
        _ => None,
    }
}

/// What a bucket's rule makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Everything passes.
    AllowAll,
    /// Nothing passes.
    DenyAll,
    /// `requests` per `window_secs`, shared between streams.
    Limit {
        /// Requests per window.
        requests: u64,
        /// The window in seconds (unit times multiplier).
        window_secs: u64,
    },
}

/// The policy of `bucket` in `domain` under `rules`. A rule with several limits is held
/// to its slowest one (fewest requests per second).
pub fn policy(rules: &RuleSet, domain: &str, bucket: &BucketId, no_match: NoMatch) -> Policy {
    use crate::rules::Match;
    let rule = match rules.find_bucket(domain, bucket) {
        Match::Rule(rule) => rule,
        Match::NoRule | Match::UnknownDomain => {
            return match no_match {
                NoMatch::AllowAll => Policy::AllowAll,
                NoMatch::DenyAll => Policy::DenyAll,
            };
        }
    };
    if rule.unlimited || rule.shadow_mode || rule.limits.is_empty() {
        return Policy::AllowAll;
    }
    let slowest = rule
        .limits
        .iter()
        .map(|l| {
            let window = l
                .unit
                .seconds()
                .saturating_mul(u64::from(l.unit_multiplier.max(1)));
            (u64::from(l.requests_per_unit), window)
        })
        // a/b < c/d  <=>  a*d < c*b
        .min_by(|(a, b), (c, d)| {
            (u128::from(*a) * u128::from(*d)).cmp(&(u128::from(*c) * u128::from(*b)))
        })
        .unwrap_or((0, 1));
    match slowest {
        (0, _) => Policy::DenyAll,
        (requests, window_secs) => Policy::Limit {
            requests,
            window_secs,
        },
    }
}
