//! The lone lane against the general path (`the_lone_lane_answers_as_the_general_path`),
//! and what either keeps of a huge key.

use crate::limiter::tests::Counting;

/// Rules with one of each thing the lone-descriptor lane takes or leaves to the general
/// path.
const LANE_RULES: &str = "domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: named
    rate_limit: {unit: second, requests_per_unit: 2, name: lim}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 3}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding_window}
  - key: free
    unlimited: true
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 4}
  - key: q
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: dm
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: hour, requests_per_unit: 2}
";

/// One descriptor of the lane's cases (`n` picks the entries, `v` the value).
fn lane_descriptor(n: usize, v: u8, hits: Option<u64>, limit: bool) -> crate::Descriptor {
    let v = format!("v{v}");
    let mut d = match n {
        0 => crate::Descriptor::new([("a", "1"), ("b", v.as_str())]),
        1 => crate::Descriptor::new([("a", v.as_str())]),
        _ => {
            let keys = [
                "k", "named", "shadow", "tb", "sw", "free", "multi", "q", "dm", "none",
            ];
            crate::Descriptor::new([(keys[(n - 2) % keys.len()], v.as_str())])
        }
    };
    d.hits_addend = hits;
    if limit {
        d.limit = Some(crate::LimitOverride {
            requests_per_unit: 2,
            unit: crate::Unit::Minute,
        });
    }
    d
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The lane and the general path answer every request alike, leave the same counters
    /// in the store and the same statistics, whatever the settings (the lane serves only
    /// some; the others must still answer alike).
    #[test]
    fn the_lone_lane_answers_as_the_general_path(
        shadow in proptest::bool::ANY,
        near in proptest::sample::select(vec![0.0f32, 0.5, 0.8, 1.0]),
        headers in proptest::bool::ANY,
        steps in proptest::collection::vec(
            (
                proptest::collection::vec(
                    (0usize..12, 0u8..3, proptest::option::of(0u64..4), proptest::bool::weighted(0.1)),
                    1..3,
                ),
                0u32..3,
                proptest::bool::weighted(0.1),
                0u64..1_500_000,
            ),
            1..40,
        ),
    ) {
        use crate::limiter::{HeaderNames, Limiter, LimiterSettings};
        use crate::{ManualClock, Request, Response};
        use std::sync::Arc;

        let settings = LimiterSettings {
            shadow_mode: shadow,
            near_limit_ratio: near,
            response_headers: headers.then(HeaderNames::default),
            ..LimiterSettings::default()
        };
        let build = || {
            let clock = Arc::new(ManualClock::new(1_700_000_000));
            let l = Limiter::builder(Counting::default(), clock.clone())
                .settings(settings.clone())
                .yaml("d.yaml", LANE_RULES)
                .build()
                .unwrap();
            (l, clock)
        };
        let (lane, lane_clock) = build();
        let (mut general, general_clock) = build();
        general.lone_lane = false;
        proptest::prop_assert_eq!(lane.lone_lane, !headers);
        let (mut lane_resp, mut general_resp) = (Response::default(), Response::default());
        for (descriptors, hits_addend, other_domain, advance_us) in steps {
            let descriptors = descriptors
                .into_iter()
                .map(|(n, v, hits, limit)| lane_descriptor(n, v, hits, limit))
                .collect();
            let mut req = Request::new(if other_domain { "x" } else { "d" }, descriptors);
            req.hits_addend = hits_addend;
            lane.should_rate_limit_now_into(&req, &mut lane_resp).unwrap().unwrap();
            general.should_rate_limit_now_into(&req, &mut general_resp).unwrap().unwrap();
            proptest::prop_assert_eq!(&lane_resp, &general_resp, "{:?}", req);
            lane_clock.advance_micros(advance_us);
            general_clock.advance_micros(advance_us);
        }
        let counters = |l: &Limiter<Counting, Arc<ManualClock>>| l.store().0.lock().unwrap().clone();
        proptest::prop_assert_eq!(counters(&lane), counters(&general));
        proptest::prop_assert_eq!(lane.stats().snapshot(), general.stats().snapshot());
    }
}

/// A huge descriptor value grows the thread's key buffer for one request only: both
/// paths let it go before the next.
#[test]
fn a_huge_key_is_not_kept_by_either_path() {
    use crate::limiter::{BUFFERS, Limiter, planned::SPARE_KEY_BYTES};
    use crate::{Descriptor, ManualClock, Request, Response};

    for lane in [true, false] {
        std::thread::spawn(move || {
            let mut limiter = Limiter::builder(Counting::default(), ManualClock::new(0))
                .yaml("d.yaml", LANE_RULES)
                .build()
                .unwrap();
            limiter.lone_lane = lane;
            let huge = "x".repeat(100 * SPARE_KEY_BYTES);
            for key in ["k", "tb"] {
                let req = Request::new("d", vec![Descriptor::new([(key, huge.as_str())])]);
                let mut resp = Response::default();
                limiter
                    .should_rate_limit_now_into(&req, &mut resp)
                    .unwrap()
                    .unwrap();
                let kept: usize = BUFFERS.with(|b| {
                    b.borrow()
                        .work
                        .batch
                        .iter()
                        .map(|i| i.key.capacity())
                        .max()
                        .unwrap_or(0)
                });
                assert!(
                    kept <= SPARE_KEY_BYTES,
                    "lane {lane}, {key}: {kept} bytes kept"
                );
            }
        })
        .join()
        .unwrap();
    }
}
