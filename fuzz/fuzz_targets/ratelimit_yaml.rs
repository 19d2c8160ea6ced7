//! Any text as a rule file: the loader returns rules or a ConfigError, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let stats = ratelimit_core::Stats::default();
    if let Ok(rules) = ratelimit_core::RuleSet::from_yaml([("fuzz.yaml", text.as_ref())], false, &stats) {
        let _ = rules.dump();
    }
});
