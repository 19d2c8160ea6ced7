//! Any bytes as what Redis sends back on the counting connection: parsed reply by reply,
//! each consuming at least one byte and no more than there is, or rejected; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ratelimit_backends::redis_mux::check_parse(data);
});
