//! Arbitrary requests against arbitrary valid rule sets: the limiter on the memory store
//! must never panic and must answer exactly what a small reference model of upstream's
//! semantics answers. Shared by the cargo-fuzz target and the stable corpus replay test
//! (`ratelimit-core/tests/fuzz_corpus.rs`), which include this file by path.
//!
//! The model is written from the documented rules, not from the engine's code: at each
//! level an entry matches `key_value` exactly, else the first `key_value*` prefix pattern in
//! config order, else the key-only default; a descriptor gets the rule of the node its last
//! entry reaches, if the walk gets that far; a counter is keyed by the entries and the
//! window start, and a descriptor is over when its counter passes the limit.

use std::collections::HashMap;
use std::sync::Arc;

use arbitrary::{Result, Unstructured};
use ratelimit_backends::MemoryStore;
use ratelimit_core::{Code, Descriptor, Limiter, ManualClock, Request, Unit};

const KEYS: &[&str] = &["a", "b", "c"];
const VALUES: &[&str] = &["x", "y", "xy", "yx", ""];
const UNITS: &[(Unit, &str, u64)] = &[
    (Unit::Second, "second", 1),
    (Unit::Minute, "minute", 60),
    (Unit::Hour, "hour", 3600),
];

/// A node of the generated config.
#[derive(Debug)]
struct Node {
    key: &'static str,
    /// `None`: key-only default; `Some(p)` ending in `*`: prefix wildcard.
    value: Option<String>,
    /// `(unit index, requests per unit)`; `None` with `unlimited` false: no rule here.
    limit: Option<(usize, u32)>,
    unlimited: bool,
    children: Vec<Node>,
}

fn gen_level(u: &mut Unstructured<'_>, depth: u32) -> Result<Vec<Node>> {
    let n = u.int_in_range(0..=if depth == 0 { 4 } else { 3 })?;
    let mut out: Vec<Node> = Vec::new();
    for _ in 0..n {
        let key = *u.choose(KEYS)?;
        let value = match u.int_in_range(0..=3)? {
            0 => None,
            1 => Some(format!("{}*", u.choose(&["", "x", "y"])?)),
            _ => Some((*u.choose(&VALUES[..4])?).to_string()),
        };
        // Duplicate `key`/`key_value` at one level is a config error upstream: skip those.
        if out.iter().any(|o| o.key == key && o.value == value) {
            continue;
        }
        let unlimited = u.ratio(1, 8)?;
        let limit = if unlimited || u.ratio(1, 4)? {
            None
        } else {
            Some((u.int_in_range(0..=UNITS.len() - 1)?, u.int_in_range(0..=4)?))
        };
        let children = if depth < 2 && u.ratio(1, 2)? {
            gen_level(u, depth + 1)?
        } else {
            Vec::new()
        };
        out.push(Node {
            key,
            value,
            limit,
            unlimited,
            children,
        });
    }
    Ok(out)
}

fn yaml(nodes: &[Node], indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for n in nodes {
        out.push_str(&format!("{pad}- key: {}\n", n.key));
        if let Some(v) = &n.value {
            out.push_str(&format!("{pad}  value: \"{v}\"\n"));
        }
        if n.unlimited {
            out.push_str(&format!("{pad}  rate_limit: {{unlimited: true}}\n"));
        } else if let Some((unit, rpu)) = n.limit {
            out.push_str(&format!(
                "{pad}  rate_limit: {{unit: {}, requests_per_unit: {rpu}}}\n",
                UNITS[unit].1
            ));
        }
        if !n.children.is_empty() {
            out.push_str(&format!("{pad}  descriptors:\n"));
            yaml(&n.children, indent + 4, out);
        }
    }
}

/// What the model says a descriptor is limited by.
enum ModelRule {
    None,
    Unlimited,
    Limit(usize, u32),
}

fn model_match(level: &[Node], entries: &[(&str, &str)]) -> ModelRule {
    let mut level = level;
    for (i, (k, v)) in entries.iter().enumerate() {
        let exact = level
            .iter()
            .find(|n| n.key == *k && n.value.as_deref() == Some(*v));
        let wildcard = || {
            level.iter().find(|n| {
                n.key == *k
                    && n.value
                        .as_deref()
                        .and_then(|p| p.strip_suffix('*'))
                        .is_some_and(|prefix| v.starts_with(prefix))
            })
        };
        let default = || level.iter().find(|n| n.key == *k && n.value.is_none());
        let Some(node) = exact.or_else(wildcard).or_else(default) else {
            return ModelRule::None;
        };
        if i == entries.len() - 1 {
            return if node.unlimited {
                ModelRule::Unlimited
            } else if let Some((u, r)) = node.limit {
                ModelRule::Limit(u, r)
            } else {
                ModelRule::None
            };
        }
        if node.children.is_empty() {
            return ModelRule::None;
        }
        level = &node.children;
    }
    ModelRule::None
}

/// Runs one fuzz input; panics on any disagreement with the model.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(nodes) = gen_level(&mut u, 0) else {
        return;
    };
    let mut text = String::from("domain: d\ndescriptors:\n");
    yaml(&nodes, 2, &mut text);
    if nodes.is_empty() {
        text = "domain: d\n".into();
    }
    let clock = Arc::new(ManualClock::new(1_000_000));
    let limiter = Limiter::builder(Arc::new(MemoryStore::new()), clock.clone())
        .yaml("d.yaml", text.as_str())
        .build()
        .unwrap_or_else(|e| panic!("generated config rejected: {e}\n{text}"));
    let mut counters: HashMap<(Vec<(String, String)>, u64), u64> = HashMap::new();
    let mut now = 1_000_000u64;
    while let Ok(steps) = u.int_in_range(0u8..=2) {
        if u.is_empty() {
            break;
        }
        let advance = u64::from(steps) * u64::from(u.int_in_range(0u8..=40).unwrap_or(0));
        now += advance;
        clock.set(now);
        let n = u.int_in_range(1..=3).unwrap_or(1);
        let mut descs: Vec<Vec<(&str, &str)>> = Vec::new();
        for _ in 0..n {
            let len = u.int_in_range(1..=3).unwrap_or(1);
            let mut e = Vec::new();
            for _ in 0..len {
                e.push((
                    *u.choose(KEYS).unwrap_or(&"a"),
                    *u.choose(VALUES).unwrap_or(&"x"),
                ));
            }
            descs.push(e);
        }
        let req = Request::new(
            "d",
            descs
                .iter()
                .map(|e| Descriptor::new(e.iter().copied()))
                .collect(),
        );
        let resp = futures_executor::block_on(limiter.should_rate_limit(&req))
            .unwrap_or_else(|e| panic!("decision failed: {e}"));
        assert_eq!(resp.statuses.len(), descs.len());
        let mut any_over = false;
        for (e, status) in descs.iter().zip(&resp.statuses) {
            let want = match model_match(&nodes, e) {
                ModelRule::None | ModelRule::Unlimited => Code::Ok,
                ModelRule::Limit(unit, rpu) => {
                    let secs = UNITS[unit].2;
                    let key = (
                        e.iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        now - now % secs,
                    );
                    let c = counters.entry(key).or_insert(0);
                    *c += 1;
                    if *c > u64::from(rpu) {
                        Code::OverLimit
                    } else {
                        Code::Ok
                    }
                }
            };
            any_over |= want == Code::OverLimit;
            assert_eq!(
                status.code, want,
                "descriptor {e:?} at {now}\nconfig:\n{text}\nresponse: {resp:?}"
            );
        }
        let overall = if any_over { Code::OverLimit } else { Code::Ok };
        assert_eq!(resp.overall_code, overall, "config:\n{text}");
    }
}
