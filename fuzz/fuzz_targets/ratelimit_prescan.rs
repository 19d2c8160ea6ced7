//! Any text through the rule-file pre-scan: never a depth below the parsed one.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/ratelimit_prescan.rs"]
mod harness;

fuzz_target!(|data: &[u8]| harness::run(data));
