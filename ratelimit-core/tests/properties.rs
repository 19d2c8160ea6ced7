//! Counting invariants, checked on random request sequences.

use std::sync::Arc;

use futures_executor::block_on;
use proptest::prelude::*;
use ratelimit_backends::MemoryStore;
use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request, Response, Stats};

const RULES: &str = "domain: p\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 50}\n  - key: s\n    rate_limit: {unit: second, requests_per_unit: 3}\n";

fn limiter(
    now: u64,
) -> (
    Limiter<MemoryStore, Arc<ManualClock>>,
    Arc<ManualClock>,
    Arc<Stats>,
) {
    let clock = Arc::new(ManualClock::new(now));
    let stats = Arc::new(Stats::default());
    let l = Limiter::builder(MemoryStore::new(), clock.clone())
        .stats(stats.clone())
        .yaml("p.yaml", RULES)
        .build()
        .unwrap();
    (l, clock, stats)
}

fn req(key: &str, value: &str, hits: Option<u64>) -> Request {
    let mut d = Descriptor::new([(key, value)]);
    d.hits_addend = hits;
    Request::new("p", vec![d])
}

proptest! {
    /// Within one window the remaining budget never goes up, and once over the limit a
    /// descriptor stays over until the window changes.
    #[test]
    fn remaining_never_increases_within_a_window(hits in proptest::collection::vec(0u64..8, 1..40), start in 0u64..10_000) {
        let now = start * 60;
        let (l, _clock, _) = limiter(now);
        let mut last_remaining = u32::MAX;
        let mut was_over = false;
        for h in hits {
            let r = block_on(l.should_rate_limit(&req("k", "v", Some(h)))).unwrap();
            let s = &r.statuses[0];
            prop_assert!(s.limit_remaining <= last_remaining);
            if was_over {
                prop_assert_eq!(s.code, Code::OverLimit);
            }
            was_over |= s.code == Code::OverLimit;
            last_remaining = s.limit_remaining;
        }
    }

    /// One request with hits_addend n has the same effect as n requests of one hit:
    /// same final counter, same statistics totals.
    #[test]
    fn hits_addend_is_linear(batches in proptest::collection::vec(1u32..20, 1..10)) {
        let (bulk, _, bulk_stats) = limiter(6_000);
        let (single, _, single_stats) = limiter(6_000);
        for n in &batches {
            let mut r = req("k", "v", None);
            r.hits_addend = *n;
            block_on(bulk.should_rate_limit(&r)).unwrap();
            for _ in 0..*n {
                block_on(single.should_rate_limit(&req("k", "v", None))).unwrap();
            }
        }
        let peek_bulk = block_on(bulk.should_rate_limit(&req("k", "v", Some(0)))).unwrap();
        let peek_single = block_on(single.should_rate_limit(&req("k", "v", Some(0)))).unwrap();
        prop_assert_eq!(&peek_bulk.statuses, &peek_single.statuses);
        let total = |s: &Stats, stat: &str| s.snapshot()[&format!("ratelimit.service.rate_limit.p.k.{stat}")];
        let sum: u64 = batches.iter().map(|n| u64::from(*n)).sum();
        prop_assert_eq!(total(&bulk_stats, "total_hits"), sum);
        prop_assert_eq!(total(&single_stats, "total_hits"), sum);
        // With single hits every hit is either within or over the limit.
        prop_assert_eq!(total(&single_stats, "over_limit") + total(&single_stats, "within_limit"), sum);
        prop_assert_eq!(total(&bulk_stats, "over_limit"), total(&single_stats, "over_limit"));
    }

    /// Any addend, up to `u64::MAX`, keeps the counter and the statistics running totals:
    /// they never go down (wrap), and once over the limit a descriptor stays over.
    #[test]
    fn huge_hits_saturate_counts_and_statistics(
        hits in proptest::collection::vec(prop_oneof![0u64..8, any::<u64>(), Just(u64::MAX)], 1..20)
    ) {
        let (l, _clock, stats) = limiter(6_000);
        let total = |stat: &str| stats.snapshot()[&format!("ratelimit.service.rate_limit.p.k.{stat}")];
        let (mut last_total, mut last_over, mut was_over) = (0, 0, false);
        for h in hits {
            let r = block_on(l.should_rate_limit(&req("k", "v", Some(h)))).unwrap();
            if was_over {
                prop_assert_eq!(r.overall_code, Code::OverLimit);
            }
            was_over |= r.overall_code == Code::OverLimit;
            prop_assert!(total("total_hits") >= last_total, "total_hits went down after {}", h);
            prop_assert!(total("over_limit") >= last_over, "over_limit went down after {}", h);
            last_total = total("total_hits");
            last_over = total("over_limit");
        }
    }

    /// A new window starts from zero: after the clock passes the window, the first hit
    /// leaves limit - 1.
    #[test]
    fn windows_reset(pre in 1u64..10, gap in 1u64..5) {
        let (l, clock, _) = limiter(1_000);
        for _ in 0..pre {
            block_on(l.should_rate_limit(&req("s", "x", None))).unwrap();
        }
        clock.advance(gap);
        let r = block_on(l.should_rate_limit(&req("s", "x", None))).unwrap();
        prop_assert_eq!(r.statuses[0].limit_remaining, 2);
    }
}

/// A store that always fails, to check the error path.
struct Down;

#[async_trait::async_trait]
impl ratelimit_core::CounterStore for Down {
    async fn increment(
        &self,
        _now: u64,
        _batch: &[ratelimit_core::Increment],
        _counts: &mut [u64],
    ) -> Result<(), ratelimit_core::StoreError> {
        Err(ratelimit_core::StoreError::new(
            "redis_error",
            "connection refused",
        ))
    }

    async fn get(
        &self,
        _: u64,
        _: &[ratelimit_core::Increment],
        _: &mut [u64],
    ) -> Result<(), ratelimit_core::StoreError> {
        Err(ratelimit_core::StoreError::new(
            "redis_error",
            "connection refused",
        ))
    }

    async fn refund(
        &self,
        _: u64,
        _: &[ratelimit_core::Increment],
    ) -> Result<(), ratelimit_core::StoreError> {
        Err(ratelimit_core::StoreError::new(
            "redis_error",
            "connection refused",
        ))
    }
}

/// A limiter on `store` with [`RULES`], and its statistics.
fn on_store<S: ratelimit_core::CounterStore>(store: S) -> (Limiter<S, ManualClock>, Arc<Stats>) {
    let stats = Arc::new(Stats::default());
    let l = Limiter::builder(store, ManualClock::new(0))
        .stats(stats.clone())
        .yaml("p.yaml", RULES)
        .build()
        .unwrap();
    (l, stats)
}

#[test]
fn store_failures_are_errors_counted_by_type() {
    let (l, stats) = on_store(Down);
    let e = block_on(l.should_rate_limit(&req("k", "v", None))).unwrap_err();
    assert_eq!(e.to_string(), "connection refused");
    assert_eq!(e.err_type(), "redis_error");
    assert_eq!(
        stats.snapshot()["ratelimit.service.call.should_rate_limit.redis_error"],
        1
    );
    // Requests that need no store call still work while the store is down.
    let r = block_on(l.should_rate_limit(&req("nope", "v", None))).unwrap();
    assert_eq!(r.overall_code, Code::Ok);
}

/// An in-process store that always fails: the synchronous entry points take it.
struct DownInProcess;

#[async_trait::async_trait]
impl ratelimit_core::CounterStore for DownInProcess {
    async fn increment(
        &self,
        now: u64,
        batch: &[ratelimit_core::Increment],
        counts: &mut [u64],
    ) -> Result<(), ratelimit_core::StoreError> {
        self.increment_now(now, batch, counts)
    }

    fn kind(&self) -> ratelimit_core::StoreKind {
        ratelimit_core::StoreKind::InProcess {
            expires_by_ttl: false,
            by_id: false,
        }
    }

    fn increment_now(
        &self,
        _: u64,
        _: &[ratelimit_core::Increment],
        _: &mut [u64],
    ) -> Result<(), ratelimit_core::StoreError> {
        Err(ratelimit_core::StoreError::new("disk_error", "full"))
    }

    async fn get(
        &self,
        _: u64,
        _: &[ratelimit_core::Increment],
        _: &mut [u64],
    ) -> Result<(), ratelimit_core::StoreError> {
        Ok(())
    }

    async fn refund(
        &self,
        _: u64,
        _: &[ratelimit_core::Increment],
    ) -> Result<(), ratelimit_core::StoreError> {
        Ok(())
    }
}

/// The synchronous path answers an in-process store's failure as an error and counts it
/// by type, for a lone descriptor (its own lane) and for several.
#[test]
fn in_process_store_failures_are_errors_counted_by_type() {
    let (l, stats) = on_store(DownInProcess);
    let mut two = req("k", "v", None);
    two.descriptors.push(Descriptor::new([("s", "v")]));
    let mut resp = Response::default();
    for (i, r) in [req("k", "v", None), two].iter().enumerate() {
        let e = l
            .should_rate_limit_now_into(r, &mut resp)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            (e.err_type(), e.to_string().as_str()),
            ("disk_error", "full")
        );
        assert_eq!(
            stats.snapshot()["ratelimit.service.call.should_rate_limit.disk_error"],
            i as u64 + 1
        );
    }
}

/// Upstream's memory leak with per-IP overrides (its issues #275, #1132): 100k distinct
/// override values must not grow the statistics past the cap.
#[test]
fn override_stats_stay_under_the_cap() {
    let stats = Arc::new(Stats::with_dynamic_cap(1_000));
    let l = Limiter::builder(MemoryStore::new(), ManualClock::new(0))
        .stats(stats.clone())
        .yaml("p.yaml", RULES)
        .build()
        .unwrap();
    for i in 0..100_000u32 {
        let d = Descriptor::new([(
            "remote_address",
            format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
        )])
        .with_limit(5, ratelimit_core::Unit::Minute);
        block_on(l.should_rate_limit(&Request::new("p", vec![d]))).unwrap();
    }
    assert!(stats.dynamic_entries() <= 1_000);
    let snap = stats.snapshot();
    assert_eq!(snap["ratelimit.service.stats_dropped"], 99_000);
    assert!(snap.len() < 7_000, "{} statistics", snap.len());
}

/// The synchronous path keeps the last limiter's rules per thread: limiters decided on
/// one thread in turn must each still see their own rules, and a reload must show.
#[test]
fn sync_path_keeps_limiters_apart_and_sees_reloads() {
    let rules = |n: u32| {
        format!(
            "domain: p\ndescriptors:\n  - key: k\n    rate_limit: {{unit: minute, requests_per_unit: {n}}}\n"
        )
    };
    let build = |n: u32| {
        Limiter::builder(MemoryStore::new(), ManualClock::new(1_000_020))
            .yaml("p.yaml", rules(n))
            .build()
            .unwrap()
    };
    let (one, three) = (build(1), build(3));
    let now = |l: &Limiter<MemoryStore, ManualClock>| {
        l.should_rate_limit_now(&req("k", "v", None))
            .expect("in process")
            .unwrap()
            .overall_code
    };
    let seen: Vec<Code> = [&one, &three, &one, &three, &three, &three]
        .into_iter()
        .map(now)
        .collect();
    use Code::{Ok as O, OverLimit as X};
    assert_eq!(seen, [O, O, X, O, O, X]);

    // The same thread, the same limiter, new rules: the third hit fits under 5.
    one.reload_yaml([("p.yaml", rules(5).as_str())], false)
        .unwrap();
    assert_eq!(now(&one), O);
    assert_eq!(now(&three), X);

    // A limiter that starts without rules answers NoConfig until it gets some.
    let empty: Limiter<MemoryStore, ManualClock> =
        Limiter::builder(MemoryStore::new(), ManualClock::new(1_000_020))
            .build()
            .unwrap();
    assert_eq!(
        empty.should_rate_limit_now(&req("k", "v", None)),
        Some(Err(ratelimit_core::Error::NoConfig))
    );
    empty
        .reload_yaml([("p.yaml", rules(1).as_str())], false)
        .unwrap();
    assert_eq!(now(&empty), O);
    assert_eq!(now(&empty), X);
}
