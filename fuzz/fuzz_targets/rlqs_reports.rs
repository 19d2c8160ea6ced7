//! Any bytes as RLQS usage reports on four streams: see the harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/rlqs_reports.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
