//! RLQS on the gRPC port, with a client built from our protos: a stream's reports get
//! per-bucket actions back, and two streams share one limit.

use std::collections::HashMap;
use std::time::Duration;

use ratelimit_server::pb::envoy::r#type::v3::{
    RateLimitStrategy, TokenBucket, rate_limit_strategy,
};
use ratelimit_server::pb::rlqs::rate_limit_quota_response::bucket_action::BucketAction as Act;
use ratelimit_server::pb::rlqs::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use ratelimit_server::pb::rlqs::rate_limit_quota_usage_reports::BucketQuotaUsage;
use ratelimit_server::pb::rlqs::{BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::common::{channel, request, start};

pub const RULES: &str = "domain: q\ndescriptors:\n  - key: name\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: name\n    value: closed\n    rate_limit: {unit: minute, requests_per_unit: 0}\n  - key: name\n    value: open\n    rate_limit: {unlimited: true}\n";

pub fn bucket(name: &str) -> BucketId {
    BucketId {
        bucket: HashMap::from([("name".to_owned(), name.to_owned())]),
    }
}

pub fn usage(name: &str, allowed: u64) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(bucket(name)),
        time_elapsed: Some(prost_types::Duration::default()),
        num_requests_allowed: allowed,
        num_requests_denied: 0,
    }
}

pub struct Envoy {
    pub reports: mpsc::Sender<RateLimitQuotaUsageReports>,
    pub actions: Streaming<RateLimitQuotaResponse>,
}

pub async fn open(addr: &str, domain: &str, first: Vec<BucketQuotaUsage>) -> Envoy {
    let (tx, rx) = mpsc::channel(8);
    tx.send(RateLimitQuotaUsageReports {
        domain: domain.to_owned(),
        bucket_quota_usages: first,
    })
    .await
    .unwrap();
    let mut client = RateLimitQuotaServiceClient::new(channel(addr).await);
    let actions = client
        .stream_rate_limit_quotas(ReceiverStream::new(rx))
        .await
        .expect("stream opens")
        .into_inner();
    Envoy {
        reports: tx,
        actions,
    }
}

/// The strategies of the next message, by bucket name.
pub async fn next(e: &mut Envoy) -> HashMap<String, Option<RateLimitStrategy>> {
    let msg = tokio::time::timeout(Duration::from_secs(5), e.actions.message())
        .await
        .expect("an answer in time")
        .expect("no error")
        .expect("stream open");
    msg.bucket_action
        .into_iter()
        .map(|a| {
            let name = a.bucket_id.unwrap().bucket["name"].clone();
            let strategy = match a.bucket_action.unwrap() {
                Act::QuotaAssignmentAction(q) => {
                    assert!(q.assignment_time_to_live.unwrap().seconds >= 2);
                    q.rate_limit_strategy
                }
                Act::AbandonAction(_) => None,
            };
            (name, strategy)
        })
        .collect()
}

pub fn blanket(rule: rate_limit_strategy::BlanketRule) -> Option<RateLimitStrategy> {
    Some(RateLimitStrategy {
        strategy: Some(rate_limit_strategy::Strategy::BlanketRule(rule as i32)),
    })
}

pub fn tokens(n: u32) -> Option<RateLimitStrategy> {
    Some(RateLimitStrategy {
        strategy: Some(rate_limit_strategy::Strategy::TokenBucket(TokenBucket {
            max_tokens: n,
            tokens_per_fill: Some(n),
            fill_interval: Some(prost_types::Duration {
                seconds: 60,
                nanos: 0,
            }),
            name: String::new(),
        })),
    })
}

#[tokio::test]
async fn rlqs_streams_get_assignments_and_share_a_limit() {
    let srv = start(&[("q.yaml", RULES)], &[]);
    let mut a = open(
        &srv.grpc,
        "q",
        vec![usage("x", 1), usage("open", 1), usage("closed", 1)],
    )
    .await;
    let first = next(&mut a).await;
    use rate_limit_strategy::BlanketRule::{AllowAll, DenyAll};
    assert_eq!(first["open"], blanket(AllowAll));
    assert_eq!(first["closed"], blanket(DenyAll));
    assert_eq!(first["x"], tokens(10), "{first:?}");

    // A second Envoy subscribes to the same bucket: each gets half.
    let mut b = open(&srv.grpc, "q", vec![usage("x", 1)]).await;
    let b_first = next(&mut b).await;
    assert_eq!(b_first["x"], tokens(5), "{b_first:?}");
    let a_now = next(&mut a).await;
    assert_eq!(a_now["x"], tokens(5), "{a_now:?}");

    // A bucket no rule matches is allowed; reports after the first need no domain.
    a.reports
        .send(RateLimitQuotaUsageReports {
            domain: String::new(),
            bucket_quota_usages: vec![BucketQuotaUsage {
                bucket_id: Some(BucketId {
                    bucket: HashMap::from([("other".to_owned(), "y".to_owned())]),
                }),
                ..usage("unused", 0)
            }],
        })
        .await
        .unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(5), a.actions.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let act = &msg.bucket_action[0];
    assert_eq!(act.bucket_id.as_ref().unwrap().bucket["other"], "y");
    let Some(Act::QuotaAssignmentAction(q)) = &act.bucket_action else {
        panic!("{msg:?}")
    };
    assert_eq!(q.rate_limit_strategy, blanket(AllowAll));

    // Counted: two streams, five reports, and (at least) the six assignments seen here.
    let stats = request(srv.debug, "GET", "/stats", b"").text();
    let value = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("ratelimit_server.RLQS.{name}: ")))
            .unwrap_or_else(|| panic!("{name} in {stats}"))
            .parse()
            .unwrap()
    };
    assert_eq!(value("streams"), 2);
    assert_eq!(value("reports"), 5);
    assert!(value("assignments") >= 6, "{stats}");
    assert_eq!(value("abandons"), 0);
}

#[tokio::test]
async fn a_stream_without_a_domain_is_refused() {
    let srv = start(&[("q.yaml", RULES)], &[]);
    let mut e = open(&srv.grpc, "", vec![usage("x", 1)]).await;
    let err = tokio::time::timeout(Duration::from_secs(5), e.actions.message())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn sigterm_ends_rlqs_streams_at_once() {
    let mut srv = start(&[("q.yaml", RULES)], &[]);
    let mut e = open(&srv.grpc, "q", vec![usage("x", 1)]).await;
    assert_eq!(next(&mut e).await["x"], tokens(10));
    let stopping = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        let status = srv.proc.terminate(Duration::from_secs(15));
        (status, srv)
    });
    let err = tokio::time::timeout(Duration::from_secs(5), e.actions.message())
        .await
        .expect("the stream ends")
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    let (status, _srv) = status.await.unwrap();
    let took = stopping.elapsed();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    // Well inside the 10 s drain that an open stream would otherwise hold it for.
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
}
