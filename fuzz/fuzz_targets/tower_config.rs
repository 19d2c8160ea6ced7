//! Any text as the tower layer's YAML settings: a layer or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/tower_config.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
