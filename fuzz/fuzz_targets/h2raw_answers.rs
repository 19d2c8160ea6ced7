//! Any bytes as what a server sends the load generator's raw HTTP/2 client: frames parsed,
//! calls ended, control frames owed; never a panic, never more bytes taken than read.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ratelimit_benches::h2raw::check_feed(data);
});
