//! Any bytes as a `RateLimitRequest` on the wire: see the harness.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/ratelimit_proto.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
