//! Arbitrary requests against arbitrary valid rules, checked against a reference model.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/ratelimit_matcher.rs"]
mod harness;

fuzz_target!(|data: &[u8]| harness::run(data));
