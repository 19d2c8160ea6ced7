//! Runs `tests/data/decisions.yaml` and `tests/data/config_errors.yaml`.
//!
//! A decision case loads rule files, then sends requests in their `/json` form and
//! compares the `/json` response, the counter keys the store was asked to increment, and
//! finally the statistics. Going through the JSON mapping keeps the cases readable and
//! exercises the wire format on every case.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ratelimit_backends::MemoryStore;
use ratelimit_core::{
    Code, ConfigErrorKind, CounterStore, CurrentLimit, DescriptorStatus, Header, HeaderNames,
    Increment, Limiter, LimiterSettings, ManualClock, Response, RuleSet, Stats, StoreError,
    StoreKind, Unit, json,
};
use serde_json::Value;

/// A memory store that records what it was asked. With `in_process` it also counts
/// synchronously, so the limiter takes its no-future path: every case runs both ways.
#[derive(Default)]
struct Recording {
    inner: MemoryStore,
    seen: Mutex<Vec<String>>,
    in_process: bool,
}

impl Recording {
    fn record(&self, batch: &[Increment]) {
        let mut seen = self.seen.lock().unwrap();
        for i in batch {
            seen.push(format!("{}+{} ttl={}", i.key, i.hits, i.ttl_seconds));
        }
    }
}

#[async_trait]
impl CounterStore for Recording {
    async fn increment(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        self.record(batch);
        self.inner.increment(now, batch, counts).await
    }

    fn kind(&self) -> StoreKind {
        if self.in_process {
            StoreKind::InProcess {
                expires_by_ttl: true,
                by_id: false,
            }
        } else {
            StoreKind::Remote
        }
    }

    fn increment_now(
        &self,
        now: u64,
        batch: &[Increment],
        counts: &mut [u64],
    ) -> Result<(), StoreError> {
        self.record(batch);
        self.inner.increment_now(now, batch, counts)
    }

    async fn get(&self, now: u64, batch: &[Increment], out: &mut [u64]) -> Result<(), StoreError> {
        let keys: Vec<&str> = batch.iter().map(Increment::read_key).collect();
        self.seen
            .lock()
            .unwrap()
            .push(format!("GET {}", keys.join(" ")));
        self.inner.get(now, batch, out).await
    }

    async fn refund(&self, now: u64, batch: &[Increment]) -> Result<(), StoreError> {
        {
            let mut seen = self.seen.lock().unwrap();
            for i in batch {
                seen.push(format!("{}-{}", i.key, i.hits));
            }
        }
        self.inner.refund(now, batch).await
    }
}

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn files(case: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = case["files"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(c) = case["config"].as_str() {
        out.push(("config.test.yaml".into(), c.to_owned()));
    }
    out
}

fn settings(case: &Value) -> LimiterSettings {
    let s = &case["settings"];
    let mut out = LimiterSettings {
        // Fixed TTLs make the expected keys readable; jitter has its own case.
        expiration_jitter_max_seconds: 0,
        ..LimiterSettings::default()
    };
    if let Some(p) = s["cache_key_prefix"].as_str() {
        out.cache_key_prefix = p.into();
    }
    if let Some(j) = s["jitter"].as_u64() {
        out.expiration_jitter_max_seconds = j;
    }
    if let Some(r) = s["near_limit_ratio"].as_f64() {
        out.near_limit_ratio = r as f32;
    }
    out.shadow_mode = s["shadow_mode"].as_bool().unwrap_or(false);
    out.quota_mode = s["quota_mode"].as_bool().unwrap_or(false);
    out.dynamic_metadata = s["dynamic_metadata"].as_bool().unwrap_or(false);
    out.stop_increment_when_over_limit = s["stop_increment"].as_bool().unwrap_or(false);
    out.refund_hits_when_over_limit = s["refund"].as_bool().unwrap_or(false);
    out.local_cache_bytes = s["local_cache_bytes"].as_u64().unwrap_or(0) as usize;
    if s["headers"].as_bool().unwrap_or(false) {
        out.response_headers = Some(HeaderNames::default());
    }
    out
}

/// Which entry point a case's requests go through.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// `should_rate_limit`, awaited.
    Async,
    /// `should_rate_limit_now`, a new response each time.
    Now,
    /// `should_rate_limit_now_into`, one response reused.
    NowInto,
}

#[test]
fn decision_fixtures() {
    decisions(false, Via::Async);
}

/// The same table through the in-process path (a store that counts synchronously).
#[test]
fn decision_fixtures_in_process() {
    decisions(true, Via::Async);
}

/// The in-process path through `should_rate_limit_now`, falling back to the async entry
/// point for the settings it declines.
#[test]
fn decision_fixtures_through_should_rate_limit_now() {
    decisions(true, Via::Now);
}

/// The in-process path again, through `should_rate_limit_now_into` with one response
/// reused for every decision of a case, starting from one full of stale parts: nothing of
/// an earlier answer may show through.
#[test]
fn decision_fixtures_into_a_reused_response() {
    decisions(true, Via::NowInto);
}

/// A response with something in every field, none of which any fixture expects.
fn stale_response() -> Response {
    let status = DescriptorStatus {
        code: Code::OverLimit,
        current_limit: Some(CurrentLimit::fixed(7, Unit::Day, "stale")),
        limit_remaining: 7,
        duration_until_reset: Some(7),
    };
    Response {
        overall_code: Code::OverLimit,
        statuses: vec![status; 5].into(),
        response_headers_to_add: vec![Header {
            key: "stale".into(),
            value: "7".into(),
        }],
        dynamic_metadata: Some(Box::new(serde_json::Map::from_iter([(
            "stale".to_owned(),
            Value::from(7),
        )]))),
    }
}

fn decisions(in_process: bool, via: Via) {
    let cases = load("decisions.yaml");
    assert!(cases.len() >= 30, "the table shrank: {}", cases.len());
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let clock = Arc::new(ManualClock::new(case["now"].as_u64().unwrap_or(1_000_000)));
        let store = Arc::new(Recording {
            in_process,
            ..Recording::default()
        });
        let stats = Arc::new(Stats::default());
        let mut b = Limiter::builder(store.clone(), clock.clone())
            .settings(settings(case))
            .stats(stats.clone())
            .merge_domains(case["merge"].as_bool().unwrap_or(false));
        for (n, t) in files(case) {
            b = b.yaml(n, t);
        }
        let limiter = b.build().unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut reused = stale_response();
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let repeat = step["repeat"].as_u64().unwrap_or(1);
            let body = serde_json::to_vec(&step["req"]).unwrap();
            let req = json::parse_request(&body).unwrap_or_else(|e| panic!("{name} step {i}: {e}"));
            let mut got = None;
            for _ in 0..repeat {
                store.seen.lock().unwrap().clear();
                let into = match via {
                    Via::NowInto => limiter.should_rate_limit_now_into(&req, &mut reused),
                    Via::Now => limiter.should_rate_limit_now(&req).map(|r| {
                        r.map(|resp| {
                            reused = resp;
                        })
                    }),
                    Via::Async => None,
                };
                got = Some(match into {
                    Some(r) => r.map(|()| reused.clone()),
                    None => futures_executor::block_on(limiter.should_rate_limit(&req)),
                });
            }
            let got = got.unwrap();
            match (&step["error"], got) {
                (Value::String(want), Err(e)) => {
                    assert_eq!(&e.to_string(), want, "{name} step {i}")
                }
                (Value::String(want), Ok(r)) => {
                    panic!("{name} step {i}: wanted error {want}, got {r:?}")
                }
                (_, Err(e)) => panic!("{name} step {i}: {e}"),
                (_, Ok(resp)) => {
                    let got: Value = serde_json::from_str(&json::write_response(&resp)).unwrap();
                    if !step["resp"].is_null() {
                        assert_eq!(got, step["resp"], "{name} step {i}: response");
                    }
                    if let Some(keys) = step["keys"].as_array() {
                        let seen = store.seen.lock().unwrap().clone();
                        let want: Vec<String> = keys
                            .iter()
                            .map(|k| k.as_str().unwrap().to_owned())
                            .collect();
                        assert_eq!(seen, want, "{name} step {i}: store keys");
                    }
                }
            }
            if let Some(a) = step["advance"].as_u64() {
                clock.advance(a);
            }
        }
        if let Some(want) = case["stats"].as_object() {
            let snap = stats.snapshot();
            for (k, v) in want {
                let full = if k.starts_with("ratelimit.") {
                    k.clone()
                } else {
                    format!("ratelimit.service.rate_limit.{k}")
                };
                assert_eq!(
                    snap.get(&full).copied(),
                    v.as_u64(),
                    "{name}: stat {full}; all stats: {snap:#?}"
                );
            }
        }
        if let Some(want) = case["rlconfig"].as_str() {
            assert_eq!(limiter.rules().unwrap().dump(), want, "{name}: rlconfig");
        }
    }
}

fn kind(name: &str) -> ConfigErrorKind {
    use ConfigErrorKind::*;
    match name {
        "Load" => Load,
        "KeyNotString" => KeyNotString,
        "UnknownKey" => UnknownKey,
        "ListOfNonMaps" => ListOfNonMaps,
        "CheckingConfig" => CheckingConfig,
        "EmptyDomain" => EmptyDomain,
        "DuplicateDomain" => DuplicateDomain,
        "EmptyKey" => EmptyKey,
        "DuplicateCompositeKey" => DuplicateCompositeKey,
        "UnitWhenUnlimited" => UnitWhenUnlimited,
        "InvalidUnit" => InvalidUnit,
        "EmptyReplaces" => EmptyReplaces,
        "ReplacesSelf" => ReplacesSelf,
        "ShareThresholdWithoutWildcard" => ShareThresholdWithoutWildcard,
        "Metadata" => Metadata,
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn config_error_fixtures() {
    let cases = load("config_errors.yaml");
    let mut kinds_seen = std::collections::HashSet::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let f = files(case);
        let stats = Stats::default();
        let r = RuleSet::from_yaml(
            f.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            case["merge"].as_bool().unwrap_or(false),
            &stats,
        );
        match (&case["error"], r) {
            (Value::Null, Ok(_)) => {}
            (Value::Null, Err(e)) => panic!("{name}: unexpected error {e}"),
            (want, Ok(_)) => panic!("{name}: accepted, wanted {want}"),
            (want, Err(e)) => {
                let msg = e.to_string();
                let want = want.as_str().unwrap();
                assert!(
                    msg.starts_with(want),
                    "{name}: got {msg:?}, want prefix {want:?}"
                );
                if let Some(p) = case["path"].as_str() {
                    assert_eq!(e.path, p, "{name}: path");
                }
                let k = kind(case["kind"].as_str().unwrap());
                assert_eq!(e.kind, k, "{name}: kind");
                kinds_seen.insert(format!("{k:?}"));
            }
        }
    }
    assert_eq!(
        kinds_seen.len(),
        15,
        "every error family has a case: {kinds_seen:?}"
    );
}
