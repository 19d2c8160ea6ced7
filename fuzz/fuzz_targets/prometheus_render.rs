//! Any mapper file and statistic names: `/metrics` stays valid exposition text.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/prometheus_render.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
