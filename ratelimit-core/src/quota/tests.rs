//! The engine on examples, then its bounds as properties over any traffic.

use std::sync::Arc;

use super::share::{SCALE, fair_shares, token_bucket, within};
use super::*;
use crate::stats::Stats;

mod properties;
mod replicas_and_caps;

pub(super) const RULES: &str = "\
domain: d
descriptors:
  - key: name
    value: open
    rate_limit: {unlimited: true}
  - key: name
    value: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: name
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: name
    value: big
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: name
    value: tiny
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: name
    value: quiet
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: path
        value: /login*
        rate_limit: {unit: minute, requests_per_unit: 5}
      - key: path
        rate_limit: {unit: second, requests_per_unit: 100}
";

pub(super) fn rules() -> Arc<RuleSet> {
    Arc::new(RuleSet::from_yaml([("q.yaml", RULES)], false, &Stats::default()).unwrap())
}

pub(super) fn bucket(pairs: &[(&str, &str)]) -> BucketId {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn usage(b: &BucketId, allowed: u64, elapsed_ms: u64) -> Usage {
    Usage {
        bucket: b.clone(),
        allowed,
        denied: 0,
        elapsed_ms,
    }
}

fn strategy_of(actions: &[(StreamId, Vec<Action>)], stream: StreamId) -> Option<Strategy> {
    actions
        .iter()
        .find(|(s, _)| *s == stream)
        .and_then(|(_, a)| {
            a.iter().find_map(|a| match a {
                Action::Assign { strategy, .. } => Some(*strategy),
                Action::Abandon { .. } => None,
            })
        })
}

fn held_strategy(e: &QuotaEngine, stream: StreamId) -> Option<Strategy> {
    e.assignments()
        .find(|a| a.0 == stream)
        .map(|(_, _, _, s, _)| s)
}

/// The tokens per fill of the stream's (one) token bucket.
fn holds(e: &QuotaEngine, stream: StreamId) -> Option<u32> {
    match held_strategy(e, stream)? {
        Strategy::TokenBucket(t) => Some(t.tokens_per_fill),
        _ => None,
    }
}

#[test]
fn policies_follow_the_rules() {
    let r = rules();
    let p = |pairs: &[(&str, &str)]| policy(&r, "d", &bucket(pairs), NoMatch::AllowAll);
    assert_eq!(p(&[("name", "open")]), Policy::AllowAll);
    assert_eq!(p(&[("name", "quiet")]), Policy::AllowAll);
    assert_eq!(p(&[("name", "closed")]), Policy::DenyAll);
    assert_eq!(
        p(&[("name", "anyone")]),
        Policy::Limit {
            requests: 10,
            window_secs: 60
        }
    );
    // Two entries: the tree names `tenant` first, whatever the map's order.
    assert_eq!(
        p(&[("path", "/login/x"), ("tenant", "t")]),
        Policy::Limit {
            requests: 5,
            window_secs: 60
        }
    );
    assert_eq!(
        p(&[("path", "/api"), ("tenant", "t")]),
        Policy::Limit {
            requests: 100,
            window_secs: 1
        }
    );
    // Depth must match: one entry never reaches a two-level rule, three never match.
    assert_eq!(p(&[("tenant", "t")]), Policy::AllowAll);
    assert_eq!(
        p(&[("path", "/a"), ("tenant", "t"), ("x", "y")]),
        Policy::AllowAll
    );
    assert_eq!(
        policy(&r, "d", &bucket(&[("other", "x")]), NoMatch::DenyAll),
        Policy::DenyAll
    );
    assert_eq!(
        policy(&r, "nope", &bucket(&[("name", "x")]), NoMatch::DenyAll),
        Policy::DenyAll
    );
}

#[test]
fn fair_shares_examples() {
    // Floors of 100 each (more than the small demand), the big one gets the rest.
    assert_eq!(fair_shares(1000, &[50, 5000], 200), vec![100, 900]);
    assert_eq!(fair_shares(1000, &[300, 5000], 200), vec![300, 700]);
    // Nobody asks: the budget is split evenly.
    assert_eq!(fair_shares(1000, &[0, 0, 0], 100), vec![334, 333, 333]);
    // Both want more than half: halves.
    assert_eq!(fair_shares(1000, &[900, 800], 0), vec![500, 500]);
    assert!(fair_shares(1000, &[], 100).is_empty());
}

#[test]
fn token_buckets_examples() {
    assert_eq!(
        token_bucket(10 * SCALE, 60),
        Some(TokenBucket {
            max_tokens: 10,
            tokens_per_fill: 10,
            fill_interval_secs: 60
        })
    );
    // A third of a request a minute: one every three minutes.
    assert_eq!(
        token_bucket(SCALE / 3, 60),
        Some(TokenBucket {
            max_tokens: 1,
            tokens_per_fill: 1,
            fill_interval_secs: 181
        })
    );
    assert_eq!(token_bucket(0, 60), None);
}

#[test]
fn two_envoys_share_a_limit_by_demand() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let b = bucket(&[("name", "x")]); // 10 a minute
    e.connect(1, "d", Some("a"));
    e.connect(2, "d", Some("b"));
    e.report(1, &[usage(&b, 1, 0)], 0);
    e.report(2, &[usage(&b, 1, 0)], 0);
    let out = e.tick(0, &NoPeers);
    // Equal demand: 5 a minute each.
    let five = Strategy::TokenBucket(TokenBucket {
        max_tokens: 5,
        tokens_per_fill: 5,
        fill_interval_secs: 60,
    });
    assert_eq!(strategy_of(&out, 1), Some(five));
    assert_eq!(strategy_of(&out, 2), Some(five));
    // Envoy 1 goes busy, Envoy 2 nearly idle (one request in 30 s, 2 a minute): 2 gets
    // its demand, 1 the rest.
    for t in 1..=6 {
        e.report(1, &[usage(&b, 50, 5000)], t * 5000);
        e.report(2, &[usage(&b, 0, 5000)], t * 5000);
    }
    let out = e.tick(30_000, &NoPeers);
    let Some(Strategy::TokenBucket(one)) = strategy_of(&out, 1) else {
        panic!("{out:?}")
    };
    assert_eq!(one.tokens_per_fill, 8, "{out:?}");
    assert!(
        matches!(strategy_of(&out, 2), Some(Strategy::TokenBucket(t)) if t.tokens_per_fill == 2)
    );
    // Quite idle now: 2 keeps its floor (a tenth of the budget, halved), 1 takes the rest.
    for t in 7..=12 {
        e.report(1, &[usage(&b, 50, 5000)], t * 5000);
        e.report(2, &[usage(&b, 0, 5000)], t * 5000);
    }
    e.tick(60_000, &NoPeers);
    // 9 would be 12.5 % faster than 8: under the change threshold, 1 keeps its 8 (and the
    // tokens Envoy counts in it).
    assert_eq!(holds(&e, 1), Some(8));
    // Half a request a minute: one request every 120 s.
    assert!(
        matches!(held_strategy(&e, 2), Some(Strategy::TokenBucket(t)) if t.fill_interval_secs == 120)
    );
}

#[test]
fn blanket_rules_and_refresh_before_the_ttl() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let open = bucket(&[("name", "open")]);
    let closed = bucket(&[("name", "closed")]);
    e.connect(7, "d", None);
    e.report(7, &[usage(&open, 1, 0), usage(&closed, 1, 0)], 0);
    let out = e.tick(0, &NoPeers);
    assert_eq!(
        out,
        vec![(
            7,
            vec![
                Action::Assign {
                    bucket: closed.clone(),
                    strategy: Strategy::DenyAll,
                    ttl_secs: 30
                },
                Action::Assign {
                    bucket: open.clone(),
                    strategy: Strategy::AllowAll,
                    ttl_secs: 30
                },
            ]
        )]
    );
    assert!(e.tick(9_999, &NoPeers).is_empty());
    assert_eq!(e.tick(10_000, &NoPeers)[0].1.len(), 2);
}

#[test]
fn small_increases_keep_the_bucket_and_decreases_are_sent_at_once() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let big = bucket(&[("name", "big")]); // 1000 a second
    e.connect(1, "d", Some("a"));
    e.connect(2, "d", Some("b"));
    e.report(1, &[usage(&big, 500, 1000)], 0);
    e.report(2, &[usage(&big, 500, 1000)], 0);
    e.tick(0, &NoPeers);
    assert_eq!((holds(&e, 1), holds(&e, 2)), (Some(500), Some(500)));
    // 2's demand drops a little: 1 could have 550, 10 % more: kept, nothing sent to 1.
    e.report(1, &[usage(&big, 500, 1000)], 1000);
    e.report(2, &[usage(&big, 400, 1000)], 1000);
    let out = e.tick(1000, &NoPeers);
    assert_eq!(holds(&e, 1), Some(500));
    assert!(strategy_of(&out, 1).is_none(), "{out:?}");
    // 1 slows down (367 a second over its reports) while 2 asks for much more: 1's share
    // falls under its bucket, which is replaced at once.
    e.report(1, &[usage(&big, 100, 1000)], 2000);
    e.report(2, &[usage(&big, 5000, 1000)], 2000);
    let out = e.tick(2000, &NoPeers);
    assert!(strategy_of(&out, 1).is_some(), "{out:?}");
    assert!(holds(&e, 1) < Some(500));
    // The refresh of a kept bucket re-sends the kept one.
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    e.connect(1, "d", None);
    e.connect(2, "d", None);
    e.report(1, &[usage(&big, 500, 1000)], 0);
    e.report(2, &[usage(&big, 500, 1000)], 0);
    e.tick(0, &NoPeers);
    e.report(2, &[usage(&big, 400, 1000)], 1000);
    e.tick(1000, &NoPeers);
    let out = e.tick(10_000, &NoPeers);
    let tb = |n| {
        Strategy::TokenBucket(TokenBucket {
            max_tokens: n,
            tokens_per_fill: n,
            fill_interval_secs: 1,
        })
    };
    assert_eq!(strategy_of(&out, 1), Some(tb(500)), "{out:?}");
}

#[test]
fn a_report_is_answered_for_its_new_buckets_only() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let x = bucket(&[("name", "x")]);
    let open = bucket(&[("name", "open")]);
    e.connect(1, "d", None);
    e.report(1, &[usage(&x, 1, 0)], 0);
    assert_eq!(e.tick_fresh(0, &NoPeers)[0].1.len(), 1);
    // Nothing new: nothing to say until the full tick.
    e.report(1, &[usage(&x, 100, 5000)], 5000);
    assert!(e.tick_fresh(5000, &NoPeers).is_empty());
    // A second stream on x: both hear of it at once; open is new for stream 1.
    e.connect(2, "d", None);
    e.report(2, &[usage(&x, 1, 0)], 5000);
    e.report(1, &[usage(&open, 1, 0)], 5000);
    let out = e.tick_fresh(5000, &NoPeers);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0].1.len(), 2, "{out:?}");
    assert!(e.tick_fresh(5000, &NoPeers).is_empty());
}

#[test]
fn idle_buckets_are_abandoned() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let b = bucket(&[("name", "x")]);
    e.connect(1, "d", None);
    e.report(1, &[usage(&b, 3, 0)], 0);
    e.tick(0, &NoPeers);
    // All-zero reports do not count as use.
    for t in 1..60 {
        e.report(1, &[usage(&b, 0, 5000)], t * 5000);
    }
    assert!(e.subscribed(1, &b));
    let out = e.tick(300_000, &NoPeers);
    assert_eq!(out, vec![(1, vec![Action::Abandon { bucket: b.clone() }])]);
    assert!(!e.subscribed(1, &b));
}

#[test]
fn a_departed_streams_share_is_held_until_its_ttl() {
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let b = bucket(&[("name", "x")]);
    e.connect(1, "d", Some("a"));
    e.connect(2, "d", Some("b"));
    e.report(1, &[usage(&b, 1, 0)], 0);
    e.report(2, &[usage(&b, 1, 0)], 0);
    e.tick(0, &NoPeers);
    e.disconnect(1);
    assert_eq!(e.held("d", &b), 5 * SCALE);
    e.tick(1000, &NoPeers);
    assert_eq!(holds(&e, 2), Some(5));
    // The TTL ran out: all of it is Envoy 2's.
    let out = e.tick(30_000, &NoPeers);
    assert!(
        matches!(strategy_of(&out, 2), Some(Strategy::TokenBucket(t)) if t.tokens_per_fill == 10)
    );
    assert_eq!(e.held("d", &b), 0);
    // The same client reconnecting gets its share back at once.
    e.report(2, &[usage(&b, 1, 5000)], 31_000);
    e.disconnect(2);
    e.connect(3, "d", Some("b"));
    e.report(3, &[usage(&b, 1, 0)], 31_000);
    assert_eq!(e.held("d", &b), 0);
    let out = e.tick(31_000, &NoPeers);
    assert!(
        matches!(strategy_of(&out, 3), Some(Strategy::TokenBucket(t)) if t.tokens_per_fill == 10)
    );
}

#[test]
fn peers_take_their_part_of_the_budget() {
    struct Half;
    impl Peers for Half {
        fn elsewhere(&self, _: &str, _: &BucketId) -> Elsewhere {
            Elsewhere {
                streams: 1,
                demand: 0,
                held: 0,
            }
        }
    }
    let mut e = QuotaEngine::new(rules(), QuotaSettings::default());
    let b = bucket(&[("name", "x")]);
    e.connect(1, "d", None);
    e.report(1, &[usage(&b, 0, 0)], 0);
    let out = e.tick(0, &Half);
    assert!(
        matches!(strategy_of(&out, 1), Some(Strategy::TokenBucket(t)) if t.tokens_per_fill == 5)
    );
}

#[test]
fn within_is_exact() {
    let t = TokenBucket {
        max_tokens: 1,
        tokens_per_fill: 1,
        fill_interval_secs: 3,
    };
    assert!(within(&t, SCALE / 3 + 1, 1));
    assert!(!within(&t, SCALE / 3, 1));
}
