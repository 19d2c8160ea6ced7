//! RLQS bucket ids are matched against the same rule files as RLS descriptors: for every
//! request of `tests/data/decisions.yaml`, each descriptor (with distinct keys) made into a
//! bucket id finds the rule RLS finds for it, or, where RLS finds none, a rule RLS would
//! find for some order of the same entries.

use std::collections::BTreeMap;

use ratelimit_core::rules::Match;
use ratelimit_core::{Entry, RuleSet, Stats};
use serde_yaml::Value;

fn key_of(m: Match<'_>) -> Option<String> {
    match m {
        Match::Rule(r) => Some(r.full_key.clone()),
        Match::NoRule | Match::UnknownDomain => None,
    }
}

fn permutations(entries: &[Entry]) -> Vec<Vec<Entry>> {
    if entries.len() <= 1 {
        return vec![entries.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..entries.len() {
        let mut rest = entries.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first.clone());
            out.push(p);
        }
    }
    out
}

#[test]
fn buckets_match_the_rules_rls_descriptors_match() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/decisions.yaml"
    ))
    .unwrap();
    let cases: Vec<Value> = serde_yaml::from_str(&text).unwrap();
    let (mut compared, mut same_as_rls) = (0, 0);
    for case in &cases {
        let Some(config) = case["config"].as_str() else {
            continue;
        };
        let Ok(rules) = RuleSet::from_yaml([("c.yaml", config)], false, &Stats::default()) else {
            continue;
        };
        let Some(steps) = case["steps"].as_sequence() else {
            continue;
        };
        for step in steps {
            let req = &step["req"];
            let domain = req["domain"].as_str().unwrap_or_default();
            for d in req["descriptors"].as_sequence().into_iter().flatten() {
                let entries: Vec<Entry> = d["entries"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .map(|e| {
                        Entry::new(
                            e["key"].as_str().unwrap_or_default(),
                            e["value"].as_str().unwrap_or_default(),
                        )
                    })
                    .collect();
                let bucket: BTreeMap<String, String> = entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.clone()))
                    .collect();
                // Envoy's bucket ids have distinct, non-empty names and values.
                if bucket.len() != entries.len() || entries.iter().any(|e| e.value.is_empty()) {
                    continue;
                }
                compared += 1;
                let mut scratch = String::new();
                let rls = key_of(rules.find(domain, &entries, &mut scratch));
                let rlqs = key_of(rules.find_bucket(domain, &bucket));
                if rls.is_some() {
                    same_as_rls += 1;
                    assert_eq!(rlqs, rls, "{:?}: {entries:?}", case["name"]);
                } else {
                    let any_order: Vec<String> = permutations(&entries)
                        .iter()
                        .filter_map(|p| key_of(rules.find(domain, p, &mut scratch)))
                        .collect();
                    match &rlqs {
                        None => assert!(any_order.is_empty(), "{entries:?}: {any_order:?}"),
                        Some(k) => assert!(any_order.contains(k), "{entries:?}: {k}"),
                    }
                }
            }
        }
    }
    assert!(
        compared > 50 && same_as_rls > 30,
        "{compared} {same_as_rls}"
    );
}

#[test]
fn example_rules_match_buckets_with_rls_precedence() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/config/example.yaml"
    ))
    .unwrap();
    let rules =
        RuleSet::from_yaml([("example.yaml", text.as_str())], false, &Stats::default()).unwrap();
    let find = |pairs: &[(&str, &str)]| {
        let bucket = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        key_of(rules.find_bucket("rl", &bucket))
    };
    // Exact value before the key alone.
    assert_eq!(
        find(&[("api_key", "internal-batch")]).as_deref(),
        Some("rl.api_key_internal-batch")
    );
    assert_eq!(find(&[("api_key", "k1")]).as_deref(), Some("rl.api_key"));
    // Wildcard before the key alone, on the second level, whatever the map's order.
    assert_eq!(
        find(&[("path", "/login/a"), ("remote_address", "1.2.3.4")]).as_deref(),
        Some("rl.remote_address.path_/login*")
    );
    assert_eq!(
        find(&[("remote_address", "1.2.3.4"), ("path", "/api")]).as_deref(),
        Some("rl.remote_address.path")
    );
    // Depth: a one-entry bucket does not reach a two-level rule.
    assert_eq!(find(&[("remote_address", "1.2.3.4")]), None);
    assert_eq!(
        find(&[("bucket", "uploads-7")]).as_deref(),
        Some("rl.bucket_uploads-*")
    );
    assert_eq!(find(&[("bucket", "other")]), None);
}

#[test]
fn buckets_under_a_share_threshold_share_one_pool() {
    let rules = RuleSet::from_yaml(
        [(
            "q.yaml",
            "domain: q
descriptors:
  - key: org
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
    .unwrap();
    let bucket = |org: &str, path: &str| -> BTreeMap<String, String> {
        [("org", org), ("path", path)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let pool = |b| rules.bucket_pool("q", &b);
    // Shared: every /api/ path of one org draws on one budget, named by the pattern.
    assert_eq!(pool(bucket("a", "/api/x")), Some(bucket("a", "/api/*")));
    assert_eq!(pool(bucket("a", "/api/y")), Some(bucket("a", "/api/*")));
    assert_ne!(pool(bucket("b", "/api/x")), pool(bucket("a", "/api/x")));
    // Without share_threshold each bucket is its own budget; no rule, no pool.
    assert_eq!(pool(bucket("a", "/web/x")), Some(bucket("a", "/web/x")));
    assert_eq!(pool(bucket("a", "/other")), None);
    assert_eq!(rules.bucket_pool("nope", &bucket("a", "/api/x")), None);
}
