//! Any bytes as an xDS `RateLimitConfig` resource: rules or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/xds_resource.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
