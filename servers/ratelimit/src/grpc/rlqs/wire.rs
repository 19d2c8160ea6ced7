//! RLQS messages to and from the engine's types.

use ratelimit_core::quota::{Action, BucketId, Strategy, Usage};

use crate::pb::envoy::r#type::v3 as types;
use crate::pb::rlqs;
use rlqs::rate_limit_quota_response::{BucketAction, bucket_action};

/// A report's usages as the engine reads them; usages without a bucket id, or with an
/// empty one, are left out (Envoy never sends them).
pub fn usages(msg: rlqs::RateLimitQuotaUsageReports) -> Vec<Usage> {
    msg.bucket_quota_usages
        .into_iter()
        .filter_map(|u| {
            let bucket: BucketId = u.bucket_id?.bucket.into_iter().collect();
            if bucket.is_empty() {
                return None;
            }
            let elapsed_ms = u.time_elapsed.map_or(0, |d| {
                u64::try_from(d.seconds)
                    .unwrap_or(0)
                    .saturating_mul(1000)
                    .saturating_add(u64::try_from(d.nanos).unwrap_or(0) / 1_000_000)
            });
            Some(Usage {
                bucket,
                allowed: u.num_requests_allowed,
                denied: u.num_requests_denied,
                elapsed_ms,
            })
        })
        .collect()
}

/// An engine action as Envoy reads it.
pub fn action_to_pb(action: Action) -> BucketAction {
    match action {
        Action::Assign {
            bucket,
            strategy,
            ttl_secs,
        } => BucketAction {
            bucket_id: Some(bucket_to_pb(bucket)),
            bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
                bucket_action::QuotaAssignmentAction {
                    assignment_time_to_live: Some(seconds(ttl_secs)),
                    rate_limit_strategy: Some(strategy_to_pb(strategy)),
                },
            )),
        },
        Action::Abandon { bucket } => BucketAction {
            bucket_id: Some(bucket_to_pb(bucket)),
            bucket_action: Some(bucket_action::BucketAction::AbandonAction(
                bucket_action::AbandonAction {},
            )),
        },
    }
}

fn bucket_to_pb(bucket: BucketId) -> rlqs::BucketId {
    rlqs::BucketId {
        bucket: bucket.into_iter().collect(),
    }
}

fn seconds(s: u64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(s).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

fn strategy_to_pb(strategy: Strategy) -> types::RateLimitStrategy {
    use types::rate_limit_strategy::{BlanketRule, Strategy as S};
    let s = match strategy {
        Strategy::AllowAll => S::BlanketRule(BlanketRule::AllowAll as i32),
        Strategy::DenyAll => S::BlanketRule(BlanketRule::DenyAll as i32),
        Strategy::TokenBucket(t) => S::TokenBucket(types::TokenBucket {
            max_tokens: t.max_tokens,
            tokens_per_fill: Some(t.tokens_per_fill),
            fill_interval: Some(seconds(t.fill_interval_secs)),
            name: String::new(),
        }),
    };
    types::RateLimitStrategy { strategy: Some(s) }
}
