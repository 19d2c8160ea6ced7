//! Any bytes as a B3 trace header: parsed or refused, never a panic; both forms agree.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/ratelimit_b3.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
