//! The memory store names counters by a fingerprint of the key's parts
//! (`ratelimit_core::key_id`), computed from a head hashed at load where a rule's key
//! allows it and from scratch otherwise (request overrides, `share_threshold`). Whatever
//! mix of requests a descriptor arrives in, the counters must be the ones upstream's key
//! text names.

use std::sync::Arc;

use async_trait::async_trait;
use proptest::prelude::*;
use ratelimit_backends::MemoryStore;
use ratelimit_core::{
    Code, CounterStore, Descriptor, Increment, LimitOverride, Limiter, LimiterSettings,
    ManualClock, Request, StoreError, StoreKind, Unit,
};

const RULES: &str = "domain: d
descriptors:
  - key: fw
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 3}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_window}
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 5, algorithm: sliding_window}
  - key: outer
    descriptors:
      - key: inner
        rate_limit: {unit: hour, requests_per_unit: 3}
  - key: shared
    value: a*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
";

/// The memory store behind a store that counts in process but by key text: the
/// limiter writes upstream's keys, which name the counters.
struct ByText(MemoryStore);

#[async_trait]
impl CounterStore for ByText {
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        self.increment_now(now, batch, counts)
    }

    fn kind(&self) -> StoreKind {
        StoreKind::InProcess {
            expires_by_ttl: false,
            by_id: false,
        }
    }

    fn increment_now(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        assert!(batch.iter().all(|i| !i.key.is_empty()), "named by text");
        self.0.increment_now(now, batch, counts)
    }

    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        self.0.get(now, batch, out).await
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        self.0.refund(now, batch).await
    }
}

fn limiter<S: CounterStore>(
    store: S,
    clock: &Arc<ManualClock>,
    lane: bool,
) -> Limiter<S, Arc<ManualClock>> {
    // Dynamic metadata adds nothing here (no rule has any) but keeps every request off
    // the lone-descriptor lane.
    let settings = LimiterSettings {
        dynamic_metadata: !lane,
        ..LimiterSettings::default()
    };
    Limiter::builder(store, clock.clone())
        .settings(settings)
        .yaml("d.yaml", RULES)
        .build()
        .unwrap()
}

/// One descriptor of the cases: `kind` picks the rule, `value` the runtime value.
fn descriptor(kind: usize, value: u8, overridden: bool) -> Descriptor {
    let v = format!("v{value}");
    let mut d = match kind {
        0 => Descriptor::new([("fw", v.as_str())]),
        1 => Descriptor::new([("tb", v.as_str())]),
        2 => Descriptor::new([("sw", v.as_str())]),
        3 => Descriptor::new([("multi", v.as_str())]),
        4 => Descriptor::new([("outer", "o"), ("inner", v.as_str())]),
        _ => Descriptor::new([("shared", format!("a{value}").as_str())]),
    };
    if overridden {
        d.limit = Some(LimitOverride {
            requests_per_unit: 2,
            unit: Unit::Minute,
        });
    }
    d
}

/// A request: one descriptor (the lane's shape) or that descriptor after another one
/// (the general path's).
fn request((kind, value, overridden, paired): (usize, u8, bool, bool)) -> Request {
    let mut descriptors = Vec::new();
    if paired {
        descriptors.push(descriptor((kind + 1) % 6, value.wrapping_add(1) % 3, false));
    }
    descriptors.push(descriptor(kind, value, overridden));
    Request::new("d", descriptors)
}

proptest! {
    #[test]
    fn fingerprints_name_the_counters_key_texts_name(
        steps in proptest::collection::vec(
            ((0usize..6, 0u8..2, proptest::bool::weighted(0.3), any::<bool>()), 0u64..700_000),
            1..80,
        ),
    ) {
        let clock = Arc::new(ManualClock::new(1_700_000_000));
        let by_text = limiter(ByText(MemoryStore::new()), &clock, true);
        let lane = limiter(MemoryStore::new(), &clock, true);
        let general = limiter(MemoryStore::new(), &clock, false);
        for (shape, advance_us) in steps {
            let req = request(shape);
            let want = by_text.should_rate_limit_now(&req).unwrap().unwrap();
            for l in [&lane, &general] {
                let got = l.should_rate_limit_now(&req).unwrap().unwrap();
                prop_assert_eq!(&got.statuses, &want.statuses, "{:?}", req);
                prop_assert_eq!(got.overall_code, want.overall_code);
            }
            clock.advance_micros(advance_us);
        }
    }
}

/// Upstream joins a key's parts with `_`, so these two descriptors have one cache key
/// (`d_a_b_c_` and the window) and share a counter on Redis; the memory store tells its
/// parts apart and counts them on two.
#[test]
fn descriptors_that_underscores_join_count_apart_in_memory() {
    let rules = "domain: d
descriptors:
  - key: a_b
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
";
    let clock = Arc::new(ManualClock::new(1_700_000_000));
    let l = Limiter::builder(MemoryStore::new(), clock)
        .yaml("d.yaml", rules)
        .build()
        .unwrap();
    let ask = |k: &str, v: &str| {
        let req = Request::new("d", vec![Descriptor::new([(k, v)])]);
        l.should_rate_limit_now(&req).unwrap().unwrap().overall_code
    };
    assert_eq!(ask("a_b", "c"), Code::Ok);
    assert_eq!(ask("a", "b_c"), Code::Ok);
    assert_eq!(ask("a_b", "c"), Code::OverLimit);
    assert_eq!(ask("a", "b_c"), Code::OverLimit);
}
