//! The algorithms of `rate_limit` (and `rate_limits`) through the embedded limiter on the
//! memory store, on a manual clock: the contract of docs/algorithms.md, black-box.

use std::sync::Arc;

use proptest::prelude::*;
use ratelimit_backends::MemoryStore;
use ratelimit_core::key_id::KeyIdState;
use ratelimit_core::{Code, ConfigErrorKind, Descriptor, Limiter, ManualClock, Request, Response};

const T0: u64 = 1_700_000_000;

type Mem = Limiter<Arc<MemoryStore>, Arc<ManualClock>>;

fn limiter(rules: &str) -> (Mem, Arc<ManualClock>, Arc<MemoryStore>) {
    let clock = Arc::new(ManualClock::new(T0));
    let store = Arc::new(MemoryStore::new());
    let l = Limiter::builder(store.clone(), clock.clone())
        .yaml("t.yaml", format!("domain: d\ndescriptors:\n{rules}"))
        .build()
        .unwrap();
    (l, clock, store)
}

fn ask(l: &Mem, hits: u32) -> Response {
    let mut req = Request::new("d", vec![Descriptor::new([("user", "u")])]);
    req.hits_addend = hits;
    l.should_rate_limit_now(&req).unwrap().unwrap()
}

fn passes(l: &Mem, n: usize) -> usize {
    (0..n)
        .filter(|_| ask(l, 1).overall_code == Code::Ok)
        .count()
}

#[test]
fn windows_report_their_capacity_and_whole_span() {
    let (l, _, _) = limiter(
        "  - key: user\n    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 3, algorithm: sliding_window}\n",
    );
    let limit = ask(&l, 1).statuses[0].current_limit.clone().unwrap();
    assert_eq!((limit.capacity, limit.window_seconds), (3, 300));
}

#[test]
fn a_token_bucket_lets_its_burst_through_then_one_per_interval() {
    let (l, clock, _) = limiter(
        "  - key: user\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}\n",
    );
    let first = ask(&l, 1);
    assert_eq!(first.statuses[0].limit_remaining, 19);
    // Full after one interval.
    assert_eq!(first.statuses[0].duration_until_reset, Some(1));
    assert_eq!(passes(&l, 25), 19);
    let denied = ask(&l, 1);
    assert_eq!(denied.overall_code, Code::OverLimit);
    let s = &denied.statuses[0];
    assert_eq!((s.limit_remaining, s.duration_until_reset), (0, Some(1)));
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!((limit.requests_per_unit, limit.unit.name()), (10, "SECOND"));
    // What a `RateLimit-Policy` header needs: 20 at once, refilled in 2 s.
    assert_eq!((limit.capacity, limit.window_seconds), (20, 2));
    // 100 ms later one token is back, and only one.
    clock.advance_micros(100_000);
    assert_eq!(passes(&l, 3), 1);
    // Two seconds later the bucket is full again: 20.
    clock.advance(2);
    assert_eq!(passes(&l, 30), 20);
}

#[test]
fn a_denied_bucket_request_takes_nothing() {
    let (l, _, _) = limiter(
        "  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: token_bucket}\n",
    );
    // 5 of 6 tokens; a request for 2 is denied and leaves the last token.
    assert_eq!(
        (0..5)
            .filter(|_| ask(&l, 1).overall_code == Code::Ok)
            .count(),
        5
    );
    let denied = ask(&l, 2);
    assert_eq!(denied.overall_code, Code::OverLimit);
    assert_eq!(denied.statuses[0].limit_remaining, 1, "{denied:?}");
    // Waiting 10 s (one token per 10 s) would admit it.
    assert_eq!(denied.statuses[0].duration_until_reset, Some(10));
    assert_eq!(ask(&l, 1).overall_code, Code::Ok);
}

#[test]
fn a_sliding_window_weighs_the_previous_window_and_counts_only_what_it_admits() {
    let (l, clock, _) = limiter(
        "  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}\n",
    );
    clock.set(T0 - T0 % 60);
    // A client calling far above the limit still gets its limit through.
    assert_eq!(passes(&l, 50), 10);
    // A quarter into the next minute, 7.5 of those 10 still count: 2 more pass.
    clock.advance(75);
    assert_eq!(passes(&l, 10), 2);
    // Two windows on, nothing counts.
    clock.advance(120);
    assert_eq!(passes(&l, 20), 10);
}

#[test]
fn unit_multiplier_makes_windows_of_that_many_units_aligned_to_the_epoch() {
    let (l, clock, store) = limiter(
        "  - key: user\n    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 3}\n",
    );
    let start = T0 - T0 % 300;
    clock.set(start + 299);
    assert_eq!(passes(&l, 5), 3);
    // The five-minute window's counter (the memory store names it by the key's parts
    // and the window's length; the key text is checked on memcached and Redis).
    let mut id = KeyIdState::key_parts(false, 300, 1, "d", "");
    id.entry("user", "u");
    assert_eq!(store.value_of(start + 299, &id.finish_key("")), Some(5));
    let s = ask(&l, 1).statuses[0].clone();
    assert_eq!(s.duration_until_reset, Some(1));
    clock.set(start + 300);
    assert_eq!(passes(&l, 5), 3);
}

#[test]
fn several_limits_report_the_first_that_denies_and_spare_the_bucket() {
    let (l, clock, _) = limiter(concat!(
        "  - key: user\n    rate_limits:\n",
        "      - {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 3, name: bucket}\n",
        "      - {unit: minute, requests_per_unit: 2, algorithm: sliding_window, name: per_minute}\n",
    ));
    clock.set(T0 - T0 % 60);
    let name = |r: &Response| r.statuses[0].current_limit.as_ref().unwrap().name.clone();
    let first = ask(&l, 1);
    // Within both: the one with the fewest remaining is reported (the minute, 1 left).
    assert_eq!(
        (first.overall_code, name(&first)),
        (Code::Ok, "per_minute".to_owned())
    );
    assert_eq!(first.statuses[0].limit_remaining, 1);
    assert_eq!(ask(&l, 1).overall_code, Code::Ok);
    // The minute denies; the bucket would have admitted, and keeps its last token.
    let denied = ask(&l, 1);
    assert_eq!(
        (denied.overall_code, name(&denied)),
        (Code::OverLimit, "per_minute".to_owned())
    );
    clock.advance(120);
    let last = ask(&l, 1);
    assert_eq!(
        (last.overall_code, name(&last)),
        (Code::Ok, "bucket".to_owned())
    );
    assert_eq!(last.statuses[0].limit_remaining, 0);
    let empty = ask(&l, 1);
    assert_eq!(
        (empty.overall_code, name(&empty)),
        (Code::OverLimit, "bucket".to_owned())
    );
}

#[test]
fn fixed_windows_in_a_list_count_every_hit_as_upstream_does() {
    let (l, clock, _) = limiter(concat!(
        "  - key: user\n    rate_limits:\n",
        "      - {unit: second, requests_per_unit: 2, algorithm: token_bucket}\n",
        "      - {unit: minute, requests_per_unit: 5}\n",
    ));
    clock.set(T0 - T0 % 60);
    // 2 pass, 4 are denied by the bucket but counted by the minute's fixed window.
    assert_eq!(passes(&l, 6), 2);
    clock.advance(1);
    assert_eq!(passes(&l, 2), 0, "the minute saw 6 hits already");
}

#[test]
fn the_new_fields_are_checked_at_load() {
    let cases = [
        (
            "{unit: second, requests_per_unit: 1, algorithm: leaky_bucket}",
            ConfigErrorKind::UnknownAlgorithm,
            "descriptors[0].rate_limit.algorithm",
        ),
        (
            "{unit: second, requests_per_unit: 1, burst: 3}",
            ConfigErrorKind::BurstWithoutTokenBucket,
            "descriptors[0].rate_limit.burst",
        ),
        (
            "{unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: 0}",
            ConfigErrorKind::ZeroLimitField,
            "descriptors[0].rate_limit.burst",
        ),
        (
            "{unit: second, requests_per_unit: 1, unit_multiplier: 0}",
            ConfigErrorKind::ZeroLimitField,
            "descriptors[0].rate_limit.unit_multiplier",
        ),
    ];
    for (rl, kind, path) in cases {
        let yaml = format!("domain: d\ndescriptors:\n  - key: user\n    rate_limit: {rl}\n");
        let e = Limiter::builder(MemoryStore::new(), ManualClock::new(T0))
            .yaml("t.yaml", &yaml)
            .build()
            .err()
            .unwrap_or_else(|| panic!("{rl} loaded"));
        assert_eq!((e.kind, e.path.as_str()), (kind, path), "{e}");
        assert!(e.to_string().starts_with("t.yaml: "), "{e}");
    }
    let lists = [
        (
            "rate_limit: {unit: second, requests_per_unit: 1}\n    rate_limits: [{unit: day, requests_per_unit: 2}]",
            ConfigErrorKind::RateLimitAndRateLimits,
            "descriptors[0]",
        ),
        (
            "rate_limits: []",
            ConfigErrorKind::InvalidRateLimits,
            "descriptors[0].rate_limits",
        ),
        (
            "rate_limits: [{unit: second, requests_per_unit: 1, name: a}, {unit: day, requests_per_unit: 2, name: a}]",
            ConfigErrorKind::DuplicateLimitName,
            "descriptors[0].rate_limits[1]",
        ),
    ];
    for (block, kind, path) in lists {
        let yaml = format!("domain: d\ndescriptors:\n  - key: user\n    {block}\n");
        let e = Limiter::builder(MemoryStore::new(), ManualClock::new(T0))
            .yaml("t.yaml", &yaml)
            .build()
            .err()
            .unwrap_or_else(|| panic!("{block} loaded"));
        assert_eq!((e.kind, e.path.as_str()), (kind, path), "{e}");
    }
    // A name repeated across descriptors stays legal, as upstream allows.
    let yaml = "domain: d\ndescriptors:\n  - key: a\n    rate_limits: [{unit: second, requests_per_unit: 1, name: n}]\n  - key: b\n    rate_limits: [{unit: second, requests_per_unit: 1, name: n}]\n";
    assert!(
        Limiter::builder(MemoryStore::new(), ManualClock::new(T0))
            .yaml("t.yaml", yaml)
            .build()
            .is_ok()
    );
}

/// An exact token bucket in microsecond-tokens, for the model test.
struct Model {
    level: u128,
    at: u64,
    cap: u128,
    interval: u128,
}

impl Model {
    fn take(&mut self, now: u64, hits: u64) -> bool {
        self.level = (self.level + u128::from(now - self.at)).min(self.cap * self.interval);
        self.at = now;
        let need = u128::from(hits) * self.interval;
        if need <= self.level && u128::from(hits) <= self.cap {
            self.level -= need;
            true
        } else {
            false
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random traffic on a manual clock: the limiter decides as an exact token bucket.
    #[test]
    fn the_limiter_decides_as_an_exact_token_bucket(
        per_second in 1u32..20,
        burst in 1u32..30,
        steps in proptest::collection::vec((0u64..300_000, 1u32..4), 1..150),
    ) {
        let (l, clock, _) = limiter(&format!(
            "  - key: user\n    rate_limit: {{unit: second, requests_per_unit: {per_second}, algorithm: token_bucket, burst: {burst}}}\n"
        ));
        let interval = 1_000_000u64.div_ceil(u64::from(per_second));
        let start = T0 * 1_000_000;
        let mut model = Model { level: u128::from(burst) * u128::from(interval), at: start, cap: u128::from(burst), interval: u128::from(interval) };
        let mut now = start;
        for (gap, hits) in steps {
            now += gap;
            clock.set_micros(now);
            let got = ask(&l, hits).overall_code == Code::Ok;
            prop_assert_eq!(got, model.take(now, u64::from(hits)));
        }
    }
}
