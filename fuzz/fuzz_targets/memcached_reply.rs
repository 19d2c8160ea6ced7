//! Any bytes as what a memcached node sends back: the store's `get`, `incr` and `add`
//! answer or fail on them, and never panic or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ratelimit_backends::memcached::check_replies(data);
});
