//! The engine's bounds over any traffic: random connects, disconnects, reports and ticks
//! on a manual clock, checked after every tick.

use std::collections::BTreeMap;

use proptest::prelude::{
    ProptestConfig, TestCaseError, prop_assert, prop_assert_eq, prop_oneof, proptest,
};
use proptest::strategy::Strategy as Gen;

use super::super::share::{SCALE, fair_shares, local_budget, token_bucket, within};
use super::super::*;
use super::{bucket, rules};

/// Buckets of every policy: limits of several windows, blanket rules, no rule.
fn buckets() -> Vec<BucketId> {
    vec![
        bucket(&[("name", "x")]),
        bucket(&[("name", "big")]),
        bucket(&[("name", "tiny")]),
        bucket(&[("name", "open")]),
        bucket(&[("name", "closed")]),
        bucket(&[("tenant", "t"), ("path", "/login")]),
        bucket(&[("other", "o")]),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Connect(u64, Option<u8>),
    Disconnect(u64),
    Report(u64, usize, u64, u64, u64),
    Advance(u64),
}

fn op(disconnects: bool) -> impl Gen<Value = Op> {
    let disconnect_weight = if disconnects { 1 } else { 0 };
    prop_oneof![
        2 => (0u64..5, proptest::option::of(0u8..3)).prop_map(|(s, c)| Op::Connect(s, c)),
        disconnect_weight => (0u64..5).prop_map(Op::Disconnect),
        8 => (0u64..5, 0usize..7, 0u64..200, 0u64..50, 0u64..8000)
            .prop_map(|(s, b, a, d, e)| Op::Report(s, b, a, d, e)),
        4 => (0u64..120_000).prop_map(Op::Advance),
    ]
}

/// The model the test keeps: when each subscription last saw a request, and was last
/// sent an assignment.
#[derive(Default)]
struct Model {
    connected: BTreeMap<u64, ()>,
    last_request: BTreeMap<(u64, BucketId), u64>,
    last_assign: BTreeMap<(u64, BucketId), u64>,
}

fn run(ops: Vec<Op>, check_floor: bool) -> Result<(), TestCaseError> {
    let settings = QuotaSettings::default();
    let mut e = QuotaEngine::new(rules(), settings.clone());
    let all = buckets();
    let mut m = Model::default();
    let mut now = 0u64;
    for op in ops {
        // A report is answered at once for its new buckets; everything else runs the
        // full tick, as the server's ticker does.
        let report = matches!(op, Op::Report(..));
        match op {
            Op::Connect(s, c) => {
                let client = c.map(|c| format!("c{c}"));
                e.connect(s, "d", client.as_deref());
                m.connected.insert(s, ());
            }
            Op::Disconnect(s) => {
                e.disconnect(s);
                m.connected.remove(&s);
                m.last_request.retain(|(st, _), _| *st != s);
                m.last_assign.retain(|(st, _), _| *st != s);
            }
            Op::Report(s, b, allowed, denied, elapsed_ms) => {
                let usage = Usage {
                    bucket: all[b].clone(),
                    allowed,
                    denied,
                    elapsed_ms,
                };
                e.report(s, &[usage], now);
                if m.connected.contains_key(&s) {
                    let key = (s, all[b].clone());
                    if allowed + denied > 0 || !m.last_request.contains_key(&key) {
                        m.last_request.insert(key, now);
                    }
                }
            }
            Op::Advance(ms) => now += ms,
        }
        let out = if report {
            e.tick_fresh(now, &NoPeers)
        } else {
            e.tick(now, &NoPeers)
        };
        check(&e, &settings, &mut m, &out, now, check_floor)?;
        prop_assert_eq!(e.bucket_id_bytes(), e.bucket_id_bytes_recounted());
    }
    // Once every stream is gone and its shares expired, nothing is held.
    for s in 0..5 {
        e.disconnect(s);
    }
    e.tick(now + (settings.assignment_ttl_secs + 1) * 1000, &NoPeers);
    prop_assert_eq!(e.bucket_count(), 0);
    prop_assert_eq!(e.bucket_id_bytes(), 0);
    Ok(())
}

fn check(
    e: &QuotaEngine,
    settings: &QuotaSettings,
    m: &mut Model,
    out: &[(StreamId, Vec<Action>)],
    now: u64,
    check_floor: bool,
) -> Result<(), TestCaseError> {
    // Abandons: exactly the subscriptions idle for the configured time.
    let idle_ms = settings.abandon_after_secs * 1000;
    for (s, actions) in out {
        for a in actions {
            let key = (*s, a.bucket().clone());
            match a {
                Action::Abandon { .. } => {
                    let last = m.last_request.remove(&key);
                    prop_assert!(last.is_some_and(|t| now - t >= idle_ms), "early abandon");
                    m.last_assign.remove(&key);
                }
                Action::Assign { ttl_secs, .. } => {
                    prop_assert_eq!(*ttl_secs, settings.assignment_ttl_secs);
                    m.last_assign.insert(key, now);
                }
            }
        }
    }
    for ((s, b), t) in &m.last_request {
        prop_assert!(now - t < idle_ms, "idle subscription kept");
        prop_assert!(e.subscribed(*s, b));
        // Every subscription holds an assignment refreshed within the refresh period.
        let sent = m.last_assign.get(&(*s, b.clone()));
        prop_assert!(sent.is_some_and(|a| now - a < settings.refresh_secs * 1000));
    }
    // Per bucket: shares within the budget, token buckets Envoy can enforce.
    let mut totals: BTreeMap<BucketId, (u64, u64)> = BTreeMap::new();
    for (_, domain, b, strategy, share) in e.assignments() {
        let policy = e.policy(domain, b).expect("tracked");
        let entry = totals.entry(b.clone()).or_default();
        entry.0 += share;
        entry.1 += 1;
        match (policy, strategy) {
            (Policy::AllowAll, Strategy::AllowAll) | (Policy::DenyAll, Strategy::DenyAll) => {}
            (Policy::Limit { window_secs, .. }, Strategy::TokenBucket(t)) => {
                prop_assert!(t.fill_interval_secs >= 1);
                prop_assert!(t.tokens_per_fill >= 1 && t.max_tokens >= 1);
                prop_assert!(within(&t, share, window_secs), "{t:?} over {share}");
            }
            (Policy::Limit { .. }, Strategy::DenyAll) => prop_assert_eq!(share, 0),
            (p, s) => prop_assert!(false, "{s:?} under {p:?}"),
        }
    }
    for (b, (sum, streams)) in totals {
        if let Some(Policy::Limit { requests, .. }) = e.policy("d", &b) {
            let budget = requests * SCALE;
            prop_assert!(
                sum + e.held("d", &b) <= budget,
                "{b:?}: {sum} over {budget}"
            );
            if check_floor {
                // No held shares without disconnects: every stream keeps its floor.
                let floor = budget * settings.floor_permille / 1000 / streams;
                for (_, _, b2, _, share) in e.assignments() {
                    if *b2 == b {
                        prop_assert!(share >= floor, "{share} under the floor {floor}");
                    }
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn engine_bounds_hold_across_any_traffic(ops in proptest::collection::vec(op(true), 1..120)) {
        run(ops, false)?;
    }

    #[test]
    fn every_stream_keeps_a_floor(ops in proptest::collection::vec(op(false), 1..120)) {
        run(ops, true)?;
    }

    #[test]
    fn fair_shares_add_up_keep_floors_and_are_max_min_fair(
        budget in 0u64..10_000_000,
        demands in proptest::collection::vec(0u64..5_000_000, 1..12),
        floor_permille in 0u64..=1000,
    ) {
        let shares = fair_shares(budget, &demands, floor_permille);
        let n = demands.len() as u64;
        prop_assert_eq!(shares.iter().sum::<u64>(), budget);
        let floor = budget * floor_permille / 1000 / n;
        for (i, s) in shares.iter().enumerate() {
            prop_assert!(*s >= floor);
            if *s < demands[i] {
                // Nobody gets more than an unsatisfied stream, but for rounding.
                prop_assert!(shares.iter().all(|o| *o <= s + 2), "{shares:?} for {demands:?}");
            }
        }
    }

    #[test]
    fn token_buckets_never_exceed_their_share(share in 0u64..u64::from(u32::MAX), window in 1u64..40_000_000) {
        match token_bucket(share, window) {
            None => prop_assert_eq!(share, 0),
            Some(t) => {
                prop_assert!(t.fill_interval_secs >= 1 && t.tokens_per_fill >= 1 && t.max_tokens >= 1);
                prop_assert!(within(&t, share, window));
                // Not far below it either: at least half.
                prop_assert!(
                    u128::from(t.tokens_per_fill) * u128::from(SCALE) * u128::from(window) * 2
                        >= u128::from(share) * u128::from(t.fill_interval_secs)
                );
            }
        }
    }

    #[test]
    fn replicas_local_budgets_never_add_up_past_the_budget(
        budget in 0u64..10_000_000,
        replicas in proptest::collection::vec((0u64..20, 0u64..5_000_000), 1..6),
        floor_permille in 0u64..=1000,
    ) {
        // Each replica sees the others' total, as a shared aggregate would show it.
        let (streams, demand) = replicas
            .iter()
            .fold((0, 0), |(s, d), (rs, rd)| (s + rs, d + rd));
        let total: u64 = replicas
            .iter()
            .filter(|(s, _)| *s > 0)
            .map(|&(s, d)| {
                let elsewhere = Elsewhere { streams: streams - s, demand: demand - d, held: 0 };
                local_budget(budget, s, d, elsewhere, floor_permille)
            })
            .sum();
        prop_assert!(total <= budget, "{total} > {budget}");
    }
}
