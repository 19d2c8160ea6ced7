//! Any bytes as an HTTP request through the tower layer: 200 or 429, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/tower_request.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
