//! RLQS streams that misbehave: silent, malformed, or reporting a flood of buckets. Each
//! gets a clear gRPC error or abandons for itself, and a well-behaved stream on the same
//! server keeps being answered.

use std::time::{Duration, Instant};

use ratelimit_server::pb::rlqs::rate_limit_quota_response::bucket_action::BucketAction as Act;
use ratelimit_server::pb::rlqs::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use ratelimit_server::pb::rlqs::rate_limit_quota_usage_reports::BucketQuotaUsage;
use ratelimit_server::pb::rlqs::{RateLimitQuotaResponse, RateLimitQuotaUsageReports};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::common::{Server, channel, request, rss_kb, start};
use crate::rlqs_face::{RULES, next, open, tokens, usage};

/// A well-behaved Envoy's new bucket is still assigned at once.
async fn still_answers(srv: &Server, name: &str) {
    let mut ok = open(&srv.grpc, "q", vec![usage(name, 1)]).await;
    assert_eq!(next(&mut ok).await[name], tokens(10));
}

fn stat(srv: &Server, name: &str) -> u64 {
    let stats = request(srv.debug, "GET", "/stats", b"").text();
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("{name} in {stats}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_stream_that_never_names_its_domain_is_ended() {
    let srv = start(&[("q.yaml", RULES)], &[]);
    let (_tx, rx) = mpsc::channel::<RateLimitQuotaUsageReports>(1);
    let mut client = RateLimitQuotaServiceClient::new(channel(&srv.grpc).await);
    let mut silent = client
        .stream_rate_limit_quotas(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let opened = Instant::now();
    still_answers(&srv, "meanwhile").await;
    let err = tokio::time::timeout(Duration::from_secs(20), silent.message())
        .await
        .expect("ended in time")
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("domain"), "{err:?}");
    let waited = opened.elapsed();
    assert!(waited >= Duration::from_secs(9), "{waited:?}");
}

/// A report whose `domain` (field 1, a string) comes as a number.
#[derive(Clone, PartialEq, prost::Message)]
struct Garbled {
    #[prost(uint64, tag = "1")]
    domain: u64,
}

#[tokio::test]
async fn a_malformed_report_ends_its_stream_only() {
    let srv = start(&[("q.yaml", RULES)], &[]);
    let mut good = open(&srv.grpc, "q", vec![usage("a", 1)]).await;
    assert_eq!(next(&mut good).await["a"], tokens(10));

    let mut grpc = tonic::client::Grpc::new(channel(&srv.grpc).await);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(
        "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
    );
    let codec = tonic_prost::ProstCodec::<Garbled, RateLimitQuotaResponse>::default();
    let request = tonic::Request::new(tokio_stream::iter(vec![Garbled { domain: 7 }]));
    let mut bad = grpc
        .streaming(request, path, codec)
        .await
        .unwrap()
        .into_inner();
    let err = tokio::time::timeout(Duration::from_secs(5), bad.message())
        .await
        .expect("answered in time")
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("malformed"), "{err:?}");

    // The good stream goes on: a new bucket on it is assigned.
    good.reports
        .send(RateLimitQuotaUsageReports {
            domain: String::new(),
            bucket_quota_usages: vec![usage("b", 1)],
        })
        .await
        .unwrap();
    assert_eq!(next(&mut good).await["b"], tokens(10));
}

#[tokio::test]
async fn a_hundred_thousand_buckets_are_capped_and_the_rest_abandoned() {
    let srv = start(&[("q.yaml", RULES)], &[]);
    let before = rss_kb(srv.proc.child.id());
    let mut flood = open(&srv.grpc, "q", Vec::new()).await;
    // Every bucket id reported once, then all again (Envoy re-reports every 5 s).
    let (mut assigned, mut abandoned) = (0, 0);
    for round in 1..=2 {
        for chunk in 0..10 {
            let usages: Vec<BucketQuotaUsage> = (0..10_000)
                .map(|i| usage(&format!("n{}", chunk * 10_000 + i), 1))
                .collect();
            flood
                .reports
                .send(RateLimitQuotaUsageReports {
                    domain: String::new(),
                    bucket_quota_usages: usages,
                })
                .await
                .unwrap();
        }
        // The first 10,000 (RLQS_MAX_BUCKETS_PER_STREAM) are assigned once; the other
        // 90,000 are abandoned each time they are reported.
        while abandoned < round * 90_000 {
            let msg = tokio::time::timeout(Duration::from_secs(10), flood.actions.message())
                .await
                .unwrap_or_else(|_| panic!("no answer: {assigned} assigned, {abandoned} abandoned"))
                .expect("no error")
                .expect("open");
            for a in msg.bucket_action {
                let name = &a.bucket_id.as_ref().unwrap().bucket["name"];
                let n: usize = name[1..].parse().unwrap();
                match a.bucket_action.unwrap() {
                    Act::QuotaAssignmentAction(_) => {
                        assert!(n < 10_000, "{name} assigned");
                        assigned += 1;
                    }
                    Act::AbandonAction(_) => {
                        assert!(n >= 10_000, "{name} abandoned");
                        abandoned += 1;
                    }
                }
            }
        }
        assert!(assigned >= 10_000, "{assigned}");
    }
    still_answers(&srv, "after").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(stat(&srv, "ratelimit_server.RLQS.buckets"), 10_001);
    let after = rss_kb(srv.proc.child.id());
    eprintln!("RSS {before} kB -> {after} kB for 10,001 buckets after 200,000 reports");
    assert!(after < before + 64 * 1024, "RSS {before} kB -> {after} kB");
}

#[tokio::test]
async fn long_bucket_ids_are_held_to_a_byte_budget() {
    // 10,000 bytes a copy as the budget counts them (the name, its value, 64 for the
    // entry); a new bucket keeps three copies, so 100,000 bytes hold three buckets.
    let srv = start(&[("q.yaml", RULES)], &[("RLQS_MAX_BUCKET_BYTES", "100000")]);
    let long = |i: usize| format!("{i:02}{}", "x".repeat(9930));
    let usages = (0..20).map(|i| usage(&long(i), 1)).collect();
    let mut flood = open(&srv.grpc, "q", usages).await;
    let answered = next(&mut flood).await;
    assert_eq!(answered.len(), 20);
    for i in 0..20 {
        let assigned = answered[&long(i)].is_some();
        assert_eq!(assigned, i < 3, "bucket {i}: assigned {assigned}");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(stat(&srv, "ratelimit_server.RLQS.buckets"), 3);
}
