//! Any bytes as the messages of RLQS streams: each step is a byte naming what happens
//! (a report on one of four streams, a second passing, a stream ending), and a report is
//! a length-delimited `RateLimitQuotaUsageReports`, decoded and fed to the quota engine
//! as the server does. Never a panic; after every step the engine holds its caps (buckets,
//! bytes of bucket ids) and sends only token buckets Envoy can enforce; once every stream
//! is gone and its shares expired, nothing is held: no bucket and no byte. Shared by the
//! cargo-fuzz target and the stable corpus replay test
//! (`servers/ratelimit/tests/fuzz_corpus.rs`), which include this file by path.

use std::sync::Arc;

use prost::Message;
use ratelimit_core::quota::{Action, NoPeers, QuotaEngine, QuotaSettings, Strategy};
use ratelimit_core::{RuleSet, Stats};
use ratelimit_server::grpc::rlqs_usages;
use ratelimit_server::pb::rlqs::RateLimitQuotaUsageReports;

const RULES: &str = "\
domain: q
descriptors:
  - key: name
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: name
    value: open
    rate_limit: {unlimited: true}
  - key: name
    value: closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: name
    value: s*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 7}
";

/// Small caps, so that the fuzzer reaches them.
fn settings() -> QuotaSettings {
    QuotaSettings {
        max_buckets_per_stream: 6,
        max_buckets: 10,
        max_bucket_bytes: 2_000,
        ..QuotaSettings::default()
    }
}

/// Returns how many reports decoded, so the replay test can see its seeds still do.
pub fn run(data: &[u8]) -> usize {
    let rules = RuleSet::from_yaml([("q.yaml", RULES)], false, &Stats::default())
        .expect("the harness's rules load");
    let settings = settings();
    let mut engine = QuotaEngine::new(Arc::new(rules), settings.clone());
    let mut now = 0u64;
    let mut decoded = 0;
    let mut rest = data;
    while let Some((&step, tail)) = rest.split_first() {
        rest = tail;
        let stream = u64::from(step & 3);
        match step >> 2 & 3 {
            0 => {
                let Ok(msg) = RateLimitQuotaUsageReports::decode_length_delimited(&mut rest) else {
                    break;
                };
                decoded += 1;
                // The server refuses a stream whose first report names no domain.
                if engine.domain(stream).is_none() {
                    if msg.domain.is_empty() {
                        continue;
                    }
                    engine.connect(stream, &msg.domain, None);
                }
                engine.report(stream, &rlqs_usages(msg), now);
                let sent = engine.tick_fresh(now, &NoPeers);
                check(&engine, &settings, &sent);
            }
            1 | 2 => {
                now += 1000 * u64::from(step >> 4);
                let sent = engine.tick(now, &NoPeers);
                check(&engine, &settings, &sent);
            }
            _ => engine.disconnect(stream),
        }
    }
    for stream in 0..4 {
        engine.disconnect(stream);
    }
    engine.tick(now + (settings.assignment_ttl_secs + 1) * 1000, &NoPeers);
    assert_eq!(
        engine.bucket_count(),
        0,
        "buckets left after every stream went"
    );
    assert_eq!(
        engine.bucket_id_bytes(),
        0,
        "bytes left after every stream went"
    );
    decoded
}

fn check(engine: &QuotaEngine, settings: &QuotaSettings, sent: &[(u64, Vec<Action>)]) {
    assert!(engine.bucket_count() <= settings.max_buckets);
    assert!(engine.bucket_id_bytes() <= settings.max_bucket_bytes);
    for (_, actions) in sent {
        for a in actions {
            if let Action::Assign {
                strategy: Strategy::TokenBucket(t),
                ..
            } = a
            {
                assert!(t.max_tokens >= 1 && t.tokens_per_fill >= 1 && t.fill_interval_secs >= 1);
            }
        }
    }
}
