//! Any text through the rule-file pre-scan (`ratelimit_core::prescan`): it must never
//! count a depth below the depth of what the YAML parser builds from the same text, or
//! deep nesting could slip past it to a parser that takes quadratic time. Shared by the
//! cargo-fuzz target and the stable corpus replay test
//! (`ratelimit-core/tests/fuzz_corpus.rs`), which include this file by path.

use ratelimit_core::prescan;
use serde_yaml::Value;

/// Past this the parser refuses the text anyway (`serde_yaml`'s recursion limit is 128)
/// and parsing it would be the slow case the pre-scan exists for.
const PARSE_UP_TO: usize = 100;

fn depth(v: &Value) -> usize {
    match v {
        Value::Sequence(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Mapping(m) => {
            1 + m
                .iter()
                .map(|(k, v)| depth(k).max(depth(v)))
                .max()
                .unwrap_or(0)
        }
        Value::Tagged(t) => depth(&t.value),
        _ => 0,
    }
}

pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (counted, over) = prescan::scan(text, usize::MAX);
    assert!(over.is_none());
    let _ = prescan::check(text, &prescan::Limits::DEFAULT);
    let _ = prescan::check_tolerant(text, &prescan::Limits::DEFAULT);
    // Aliases repeat a node elsewhere: the parsed value is deeper than the text.
    if counted > PARSE_UP_TO || text.contains('*') {
        return;
    }
    if let Ok(v) = serde_yaml::from_str::<Value>(text) {
        let parsed = depth(&v);
        assert!(
            parsed <= counted,
            "parsed depth {parsed} > counted {counted} for {text:?}"
        );
    }
}
