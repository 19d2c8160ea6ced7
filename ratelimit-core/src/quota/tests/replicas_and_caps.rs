//! The engine's bounds on what a stream may make it hold, the claims replicas exchange,
//! and the rule counters that reports feed.

use super::*;

#[test]
fn buckets_beyond_the_caps_are_abandoned_and_not_tracked() {
    let settings = QuotaSettings {
        max_buckets_per_stream: 3,
        max_buckets: 4,
        ..QuotaSettings::default()
    };
    let mut e = QuotaEngine::new(rules(), settings);
    let names: Vec<BucketId> = (0..8)
        .map(|i| bucket(&[("name", &i.to_string())]))
        .collect();
    e.connect(1, "d", None);
    let reports: Vec<Usage> = names.iter().map(|b| usage(b, 1, 0)).collect();
    e.report(1, &reports, 0);
    let out = e.tick_fresh(0, &NoPeers);
    let abandoned: Vec<&BucketId> = out[0]
        .1
        .iter()
        .filter(|a| matches!(a, Action::Abandon { .. }))
        .map(Action::bucket)
        .collect();
    assert_eq!(abandoned, names[3..].iter().collect::<Vec<_>>());
    assert_eq!(e.bucket_count(), 3);
    // Reported again, still refused, once per report.
    e.report(1, &reports[7..], 5000);
    assert_eq!(
        e.tick_fresh(5000, &NoPeers),
        vec![(
            1,
            vec![Action::Abandon {
                bucket: names[7].clone()
            }]
        )]
    );
    // The engine-wide cap: a second stream shares a known bucket and gets one new one;
    // the next is refused although the stream is under its own cap.
    e.connect(2, "d", None);
    e.report(2, &reports[2..], 5000);
    e.tick_fresh(5000, &NoPeers);
    assert_eq!(e.bucket_count(), 4);
    assert!(e.subscribed(2, &names[2]) && e.subscribed(2, &names[3]));
    assert!(!e.subscribed(2, &names[4]));
}

#[test]
fn bucket_ids_beyond_the_byte_budget_are_abandoned_and_their_bytes_given_back() {
    let long = |i: usize| bucket(&[("name", &format!("{i}{}", "x".repeat(931)))]);
    // 1,000 bytes a copy: room for two new buckets (three copies each: the table's key,
    // the budget it draws on, the subscription) and one more subscription to a known one.
    assert_eq!(bucket_id_bytes(&long(1)), 1000);
    let settings = QuotaSettings {
        max_bucket_bytes: 7000,
        ..QuotaSettings::default()
    };
    let mut e = QuotaEngine::new(rules(), settings);
    e.connect(1, "d", None);
    let reports: Vec<Usage> = (0..4).map(|i| usage(&long(i), 1, 0)).collect();
    e.report(1, &reports, 0);
    let out = e.tick_fresh(0, &NoPeers);
    let abandoned: Vec<&BucketId> = (out[0].1.iter())
        .filter(|a| matches!(a, Action::Abandon { .. }))
        .map(Action::bucket)
        .collect();
    assert_eq!(abandoned, vec![&long(2), &long(3)]);
    assert_eq!(e.bucket_id_bytes(), 6000);
    e.connect(2, "d", None);
    e.report(2, &reports[..2], 0);
    e.tick_fresh(0, &NoPeers);
    assert!(e.subscribed(2, &long(0)) && !e.subscribed(2, &long(1)));
    assert_eq!(e.bucket_id_bytes(), 7000);
    // Gone streams give their bytes back, and their buckets once their shares expire.
    e.disconnect(1);
    e.disconnect(2);
    assert_eq!(e.bucket_id_bytes(), 4000);
    let after_ttl = (e.settings().assignment_ttl_secs + 1) * 1000;
    e.tick(after_ttl, &NoPeers);
    assert_eq!(e.bucket_id_bytes(), 0);
}

#[test]
fn a_subscription_keeps_a_bounded_number_of_reports() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let b = bucket(&[("name", "x")]);
    e.connect(1, "d", None);
    let flood = vec![usage(&b, 1, 1); 10_000];
    e.report(1, &flood, 0);
    let claims = e.claims(0);
    // 32 samples of 1 request over 1 ms each count as 32 requests over a second.
    assert_eq!(claims[0].here.demand, 32 * 60 * SCALE);
}

#[test]
fn claims_are_the_limited_buckets_streams_and_demand() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let x = bucket(&[("name", "x")]);
    let open = bucket(&[("name", "open")]);
    e.connect(1, "d", None);
    e.connect(2, "d", None);
    // 10 requests over 5 s: 2 a second, 120 a minute (the rule's window).
    e.report(1, &[usage(&x, 10, 5000), usage(&open, 3, 0)], 5000);
    e.report(2, &[usage(&x, 0, 5000)], 5000);
    let claims = e.claims(5000);
    assert_eq!(
        claims,
        vec![Claim {
            domain: "d".into(),
            bucket: x,
            here: Elsewhere {
                streams: 2,
                demand: 120 * SCALE,
                held: 0,
            },
        }]
    );
}

#[test]
fn reports_feed_the_rules_counters() {
    use std::sync::atomic::Ordering::Relaxed;
    let rules = rules();
    let mut e = QuotaEngine::new(rules.clone(), QuotaSettings::default());
    let x = bucket(&[("name", "x")]);
    e.connect(1, "d", None);
    e.report(
        1,
        &[Usage {
            bucket: x.clone(),
            allowed: 3,
            denied: 2,
            elapsed_ms: 5000,
        }],
        0,
    );
    e.report(1, &[usage(&x, 4, 5000)], 5000);
    let stats = rule_stats(&rules, "d", &x).unwrap();
    assert_eq!(stats.total_hits(), 9);
    assert_eq!(stats.within_limit.load(Relaxed), 7);
    assert_eq!(stats.over_limit.load(Relaxed), 2);
    // No rule, no counters (and nothing breaks).
    e.report(1, &[usage(&bucket(&[("other", "y")]), 1, 0)], 5000);
}

#[test]
fn a_departed_streams_held_share_is_claimed_until_its_ttl() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let x = bucket(&[("name", "x")]);
    e.connect(1, "d", None);
    e.report(1, &[usage(&x, 0, 0)], 0);
    e.tick(0, &NoPeers);
    e.disconnect(1);
    let claims = e.claims(1000);
    assert_eq!(
        claims[0].here,
        Elsewhere {
            streams: 0,
            demand: 0,
            held: 10 * SCALE,
        }
    );
    assert!(e.claims(30_000).is_empty());
}

#[test]
fn shares_held_on_other_replicas_come_off_the_budget() {
    struct Held;
    impl Peers for Held {
        fn elsewhere(&self, _: &str, _: &BucketId) -> Elsewhere {
            Elsewhere {
                streams: 0,
                demand: 0,
                held: 4 * SCALE,
            }
        }
    }
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let b = bucket(&[("name", "x")]);
    e.connect(1, "d", None);
    e.report(1, &[usage(&b, 0, 0)], 0);
    let out = e.tick(0, &Held);
    assert!(
        matches!(strategy_of(&out, 1), Some(Strategy::TokenBucket(t)) if t.tokens_per_fill == 6)
    );
}

#[test]
fn buckets_of_a_share_threshold_rule_split_one_budget() {
    let rules = Arc::new(
        RuleSet::from_yaml(
            [(
                "q.yaml",
                "domain: d
descriptors:
  - key: path
    value: /api/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /web/*
    rate_limit: {unit: minute, requests_per_unit: 10}
",
            )],
            false,
            &Stats::default(),
        )
        .unwrap(),
    );
    let mut e = QuotaEngine::new(rules, QuotaSettings::default());
    let (x, y) = (bucket(&[("path", "/api/x")]), bucket(&[("path", "/api/y")]));
    let (w, v) = (bucket(&[("path", "/web/x")]), bucket(&[("path", "/web/y")]));
    e.connect(1, "d", None);
    e.connect(2, "d", None);
    e.report(1, &[usage(&x, 1, 0), usage(&w, 1, 0)], 0);
    e.report(2, &[usage(&y, 1, 0), usage(&v, 1, 0)], 0);
    e.tick(0, &NoPeers);
    let tokens = |stream, b: &BucketId| {
        e.assignments()
            .find(|(s, _, bucket, _, _)| *s == stream && *bucket == b)
            .and_then(|(_, _, _, strategy, _)| match strategy {
                Strategy::TokenBucket(t) => Some(t.tokens_per_fill),
                _ => None,
            })
    };
    // /api/x and /api/y draw on one budget of 10; /web/x and /web/y have 10 each.
    assert_eq!((tokens(1, &x), tokens(2, &y)), (Some(5), Some(5)));
    assert_eq!((tokens(1, &w), tokens(2, &v)), (Some(10), Some(10)));
    // Replicas see the pool, named by the pattern, as one claim of two subscriptions.
    let claims = e.claims(0);
    let pool = claims
        .iter()
        .find(|c| c.bucket == bucket(&[("path", "/api/*")]))
        .unwrap();
    assert_eq!(pool.here.streams, 2);
    assert_eq!(claims.len(), 3, "{claims:?}");
}
