//! Any text as the server's environment: settings or an error naming a variable, never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/ratelimit_settings.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
