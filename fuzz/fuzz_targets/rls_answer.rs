//! Any bytes as a `RateLimitResponse`, re-encoded by hand and by prost: see the harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/rls_answer.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
