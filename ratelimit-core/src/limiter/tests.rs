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

    async fn get(&self, _: u64, _: &[&str], _: &mut [u64]) -> Result<(), crate::StoreError> {
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
