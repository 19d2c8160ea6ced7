use super::keys::jitter;
use crate::clock::Now;

#[test]
fn jitter_spreads_keys_and_stays_below_its_bound() {
    let values: std::collections::HashSet<u64> = (0..3000)
        .map(|i| jitter(&format!("domain_user_{i}_1700000000"), 300))
        .collect();
    assert!(values.iter().all(|v| *v < 300));
    // 3000 keys into 300 buckets: a fair spread leaves almost none empty.
    assert!(values.len() > 290, "only {} distinct", values.len());
    // Keys that differ only in the last byte, or only past the first eight, differ.
    assert_ne!(jitter("a_b_1", 1 << 40), jitter("a_b_2", 1 << 40));
    assert_ne!(jitter("12345678x", 1 << 40), jitter("12345678y", 1 << 40));
    assert_eq!(jitter("anything", 0), 0);
}

/// A store that must not be asked: the plan and finish steps run without one.
struct NoStore;

#[async_trait::async_trait]
impl crate::CounterStore for NoStore {
    async fn increment(
        &self,
        _: u64,
        _: &[crate::Increment],
        _: &mut [u64],
    ) -> Result<(), crate::StoreError> {
        unreachable!("the plan and finish steps ask no store")
    }

    async fn get(
        &self,
        _: u64,
        _: &[crate::Increment],
        _: &mut [u64],
    ) -> Result<(), crate::StoreError> {
        unreachable!("the plan and finish steps ask no store")
    }

    async fn refund(&self, _: u64, _: &[crate::Increment]) -> Result<(), crate::StoreError> {
        unreachable!("the plan and finish steps ask no store")
    }
}

#[test]
fn plan_and_finish_run_on_counts_of_ones_own() {
    use super::{Limiter, Plan, Planned, Work};
    use crate::{Code, Descriptor, ManualClock, Request, Response};

    let rules = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n  - key: free\n";
    let limiter = Limiter::builder(NoStore, ManualClock::new(120))
        .yaml("d.yaml", rules)
        .build()
        .unwrap();
    let set = limiter.rules().unwrap();
    let req = Request::new(
        "d",
        vec![
            Descriptor::new([("k", "v")]),
            Descriptor::new([("free", "x")]),
        ],
    );
    for (count, want) in [(2, Code::Ok), (3, Code::OverLimit)] {
        let (mut work, mut plan) = (Work::default(), Plan::default());
        assert_eq!(
            limiter.plan(&req, &set, Now::from_secs(120), &mut work, &mut plan),
            Planned::Counted
        );
        let keys: Vec<_> = work.increments(&plan).iter().map(|i| &i.key).collect();
        assert_eq!(keys, ["d_k_v_120"]);
        assert_eq!(plan.targets().count(), 2);
        let mut resp = Response::default();
        limiter.finish(&req, &plan, &work, &[count], Now::from_secs(120), &mut resp);
        assert_eq!(resp.overall_code, want);
        assert_eq!(resp.statuses.len(), 2);
    }
}

#[test]
fn the_plan_keys_and_operations_of_each_algorithm() {
    use super::{Limiter, Plan, Work};
    use crate::store::Op;
    use crate::{Descriptor, ManualClock, Request};

    let rules = concat!(
        "domain: d\ndescriptors:\n",
        "  - key: fw\n    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 2}\n",
        "  - key: sw\n    rate_limit: {unit: second, requests_per_unit: 2, algorithm: sliding_window}\n",
        "  - key: tb\n    rate_limit: {unit: second, requests_per_unit: 4, algorithm: token_bucket, burst: 8}\n",
        "  - key: long\n    rate_limit: {unit: year, unit_multiplier: 4294967295, requests_per_unit: 1}\n",
        "  - key: list\n    rate_limits:\n      - {unit: second, requests_per_unit: 1, algorithm: token_bucket}\n      - {unit: day, requests_per_unit: 9}\n",
    );
    let limiter = Limiter::builder(NoStore, ManualClock::new(0))
        .settings(crate::LimiterSettings {
            expiration_jitter_max_seconds: 0,
            ..Default::default()
        })
        .yaml("d.yaml", rules)
        .build()
        .unwrap();
    let set = limiter.rules().unwrap();
    let now = Now::from_micros(1_700_000_123_456_789);
    let req = Request::new(
        "d",
        ["fw", "sw", "tb", "long", "list"]
            .iter()
            .map(|k| Descriptor::new([(*k, "v")]))
            .collect(),
    );
    let (mut work, mut plan) = (Work::default(), Plan::default());
    limiter.plan(&req, &set, now, &mut work, &mut plan);
    let incs = work.increments(&plan);
    let got: Vec<(&str, Op, u64, u64, bool)> = incs
        .iter()
        .map(|i| (i.key.as_str(), i.op, i.limit, i.ttl_seconds, i.joint))
        .collect();
    let century = 100 * 365 * 86_400;
    assert_eq!(
        got,
        [
            // Upstream's key with the five-minute window's start.
            (
                "d_fw_v_1700000100",
                Op::Window { seconds: 300 },
                2,
                300,
                false
            ),
            (
                "d_sw_v_sw1",
                Op::Slide {
                    window_us: 1_000_000,
                    now_us: now.micros
                },
                2,
                2,
                false
            ),
            (
                "d_tb_v_tb1",
                Op::Bucket {
                    interval_us: 250_000,
                    now_us: now.micros
                },
                8,
                3,
                false
            ),
            // A window longer than a century expires after one (Redis refuses more).
            (
                "d_long_v_0",
                Op::Window {
                    seconds: 31_536_000 * 4_294_967_295
                },
                1,
                century,
                false
            ),
            // A list: one hash tag for all its keys, decided together.
            (
                "{d_list_v_}tb1",
                Op::Bucket {
                    interval_us: 1_000_000,
                    now_us: now.micros
                },
                1,
                2,
                false
            ),
            (
                "{d_list_v_}fw86400_1699920000",
                Op::Window { seconds: 86_400 },
                9,
                86_400,
                true
            ),
        ]
    );
}

#[test]
fn keys_start_from_the_rule_head_only_for_the_rules_own_entry_key() {
    use super::{Limiter, Plan, Work};
    use crate::{Descriptor, LimiterSettings, ManualClock, Request};

    let rules = concat!(
        "domain: d\ndescriptors:\n",
        "  - key: a_b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
        "  - key: x\n    descriptors:\n      - key: y\n        rate_limit: {unit: minute, requests_per_unit: 2}\n",
    );
    let build = |prefix: &str| {
        Limiter::builder(NoStore, ManualClock::new(120))
            .settings(LimiterSettings {
                cache_key_prefix: prefix.to_owned(),
                ..Default::default()
            })
            .yaml("d.yaml", rules)
            .build()
            .unwrap()
    };
    let (plain, prefixed) = (build(""), build("pre_"));
    let one = |k: &str, v: &str| Request::new("d", vec![Descriptor::new([(k, v)])]);
    let nested = Request::new("d", vec![Descriptor::new([("x", "1"), ("y", "2")])]);
    let cases = [
        // `a` + `b` matches the rule of key `a_b` through `key_value`: upstream's key
        // is built from the request's entry, not from the rule's head `d_a_b_`.
        (&plain, one("a", "b"), "d_a_b_120"),
        (&plain, one("a_b", "z"), "d_a_b_z_120"),
        (&plain, one("a_b", ""), "d_a_b__120"),
        (&prefixed, one("a_b", "z"), "pre_d_a_b_z_120"),
        (&plain, one("a_b", "z"), "d_a_b_z_120"),
        (&plain, nested.clone(), "d_x_1_y_2_120"),
        (&prefixed, nested.clone(), "pre_d_x_1_y_2_120"),
        (&prefixed, one("a", "b"), "pre_d_a_b_120"),
        (&prefixed, one("a_b", "é"), "pre_d_a_b_é_120"),
        (&prefixed, one("a_b", "z"), "pre_d_a_b_z_120"),
    ];
    // One thread's buffers for every request, as the limiters share them.
    let mut work = Work::default();
    for (limiter, req, want) in cases {
        let set = limiter.rules().unwrap();
        let mut plan = Plan::default();
        limiter.plan(&req, &set, Now::from_secs(120), &mut work, &mut plan);
        assert_eq!(work.increments(&plan)[0].key, want);
    }
}

/// An in-process store of plain counters, so that the synchronous entry points run.
#[derive(Default)]
pub(super) struct Counting(pub(super) std::sync::Mutex<std::collections::HashMap<String, u64>>);

#[async_trait::async_trait]
impl crate::CounterStore for Counting {
    async fn increment(
        &self,
        now: u64,
        batch: &[crate::Increment],
        counts: &mut [u64],
    ) -> Result<(), crate::StoreError> {
        self.increment_now(now, batch, counts)
    }

    fn kind(&self) -> crate::StoreKind {
        crate::StoreKind::InProcess {
            expires_by_ttl: false,
            by_id: false,
        }
    }

    fn increment_now(
        &self,
        _: u64,
        batch: &[crate::Increment],
        counts: &mut [u64],
    ) -> Result<(), crate::StoreError> {
        let mut map = self.0.lock().unwrap();
        for (inc, c) in batch.iter().zip(counts) {
            let v = map.entry(inc.key.clone()).or_default();
            *v += inc.hits;
            *c = *v;
        }
        Ok(())
    }

    async fn get(
        &self,
        _: u64,
        _: &[crate::Increment],
        _: &mut [u64],
    ) -> Result<(), crate::StoreError> {
        Ok(())
    }

    async fn refund(&self, _: u64, _: &[crate::Increment]) -> Result<(), crate::StoreError> {
        Ok(())
    }
}

#[test]
fn a_thread_sees_new_rules_and_tells_limiters_apart() {
    use super::Limiter;
    use crate::{Code, Descriptor, ManualClock, Request, Response};

    let rule = |n: u32| {
        format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {n}}}\n"
        )
    };
    let build = |n: u32| {
        Limiter::builder(Counting::default(), ManualClock::new(0))
            .yaml("d.yaml", rule(n))
            .build()
            .unwrap()
    };
    let (a, b) = (build(1), build(1));
    let req = Request::new("d", vec![Descriptor::new([("k", "v")])]);
    let mut resp = Response::default();
    let mut decide = |l: &Limiter<Counting, ManualClock>| {
        l.should_rate_limit_now_into(&req, &mut resp)
            .unwrap()
            .unwrap();
        resp.overall_code
    };
    assert_eq!(decide(&a), Code::Ok);
    assert_eq!(decide(&a), Code::OverLimit);
    // This thread's copy of a's rules is replaced by the next decision.
    a.reload_yaml([("d.yaml", rule(5).as_str())], false)
        .unwrap();
    assert_eq!(decide(&a), Code::Ok);
    // b's rules, then a's again: each limiter decides on its own.
    assert_eq!(decide(&b), Code::Ok);
    assert_eq!(decide(&a), Code::Ok);
    assert_eq!(decide(&b), Code::OverLimit);
    assert_eq!(decide(&a), Code::Ok);
    assert_eq!(decide(&a), Code::OverLimit);
}

#[test]
fn a_thread_lets_go_of_replaced_rules_when_told() {
    use super::{Limiter, release_thread_state};
    use crate::{Code, Descriptor, ManualClock, Request, Response};

    let rules = |n: u32| {
        format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {n}}}\n"
        )
    };
    let limiter = Limiter::builder(Counting::default(), ManualClock::new(0))
        .yaml("d.yaml", rules(1))
        .build()
        .unwrap();
    let req = Request::new("d", vec![Descriptor::new([("k", "v")])]);
    let mut resp = Response::default();
    limiter
        .should_rate_limit_now_into(&req, &mut resp)
        .unwrap()
        .unwrap();
    let first = std::sync::Arc::downgrade(&limiter.rules().unwrap());
    limiter
        .reload_yaml([("d.yaml", rules(5).as_str())], false)
        .unwrap();
    assert!(first.upgrade().is_some(), "this thread's copy holds them");
    release_thread_state();
    assert!(first.upgrade().is_none(), "nothing holds replaced rules");
    // The next decision takes the rules in force.
    limiter
        .should_rate_limit_now_into(&req, &mut resp)
        .unwrap()
        .unwrap();
    assert_eq!(resp.overall_code, Code::Ok);
}
