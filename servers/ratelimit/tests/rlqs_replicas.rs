//! Two replicas of the server on one Redis split an RLQS bucket's budget: an Envoy on
//! each gets half, and when one goes away (and its Envoy's assignment runs out) the
//! other gets all of it back.

use std::time::Duration;

use ratelimit_server::pb::rlqs::RateLimitQuotaUsageReports;
use test_support::stores as servers;

use crate::common::start;
use crate::rlqs_face::{RULES, next, open, tokens, usage};

#[tokio::test]
async fn two_replicas_split_a_budget_through_redis() {
    let redis = servers::redis();
    let url = format!("127.0.0.1:{}", redis.port);
    let env = [
        ("BACKEND_TYPE", "redis"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", url.as_str()),
        ("RLQS_ASSIGNMENT_TTL", "3s"),
        ("RLQS_REFRESH_INTERVAL", "1s"),
    ];
    let one = start(&[("q.yaml", RULES)], &env);
    let two = start(&[("q.yaml", RULES)], &env);

    let mut a = open(&one.grpc, "q", vec![usage("x", 1)]).await;
    assert_eq!(next(&mut a).await["x"], tokens(10), "alone at first");
    // The second replica reads the first one's claim before it answers.
    let mut b = open(&two.grpc, "q", vec![usage("x", 1)]).await;
    assert_eq!(next(&mut b).await["x"], tokens(5));
    // The first replica sees the second's claim within a tick or two.
    let mut seen = Vec::new();
    for _ in 0..5 {
        let x = next(&mut a).await["x"].clone();
        seen.push(x.clone());
        if x == tokens(5) {
            break;
        }
    }
    assert_eq!(seen.last().unwrap(), &tokens(5), "{seen:?}");

    // Envoy B goes away; once its assignment's TTL has run out, A gets the whole budget.
    drop(b);
    let mut seen = Vec::new();
    for _ in 0..10 {
        // Keep reporting demand, as Envoy does every few seconds.
        a.reports
            .send(RateLimitQuotaUsageReports {
                domain: String::new(),
                bucket_quota_usages: vec![usage("x", 2)],
            })
            .await
            .unwrap();
        let x = next(&mut a).await["x"].clone();
        seen.push(x.clone());
        if x == tokens(10) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(seen.last().unwrap(), &tokens(10), "{seen:?}");
    let held_while_ttl = seen.iter().filter(|s| **s == tokens(5)).count();
    assert!(
        held_while_ttl >= 1,
        "B's share is held until its TTL: {seen:?}"
    );
    drop(two);
}
