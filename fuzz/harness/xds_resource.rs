//! Any bytes as one `RateLimitConfig` resource from an xDS control plane: decoded and
//! compiled into rules, or refused with an error, never a panic; rules that compile can be
//! shown (`/rlconfig`). Shared by the cargo-fuzz target and the stable corpus replay test
//! (`servers/ratelimit/tests/fuzz_corpus.rs`), which include this file by path.

use ratelimit_core::{RuleSet, Stats};
use ratelimit_server::provider::xds::{TYPE_URL, documents_from_resources};

/// Returns whether the resource compiled into rules.
pub fn run(data: &[u8]) -> bool {
    let resource = prost_types::Any {
        type_url: TYPE_URL.to_owned(),
        value: data.to_vec(),
    };
    let Ok(docs) = documents_from_resources(&[resource]) else {
        return false;
    };
    let stats = Stats::default();
    for merge in [false, true] {
        if let Ok(rules) = RuleSet::compile(&docs, merge, &stats) {
            let _ = rules.dump();
            if !merge {
                return true;
            }
        }
    }
    false
}
