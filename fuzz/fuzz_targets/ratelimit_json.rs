//! Any bytes as a `/json` body: parsed into a request or rejected, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ratelimit_core::json::parse_request(data);
});
